use serde_json::json;

use super::*;
use crate::credentials::{Format, Source};
use crate::engine::config::{NotifySecretRef, NotifyTarget, PayloadFormat};

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
        ("unreadable-windows", ready("Held", "ChangeWindowUnreadable", NOW - 10), Some("HeldByUnreadableWindows")),
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
    assert!(slack.name.starts_with("slack.com#") && slack.name.len() == "slack.com#".len() + 6, "{}", slack.name);
    assert!(json.name.starts_with("127.0.0.1#"), "an address is a name as it is: {}", json.name);
    // A secret in a sub-domain stays out of the name (it is logged).
    let hidden = NotifyTarget::parse("https://s3cr3t.m.pipedream.net").expect("a sub-domain secret");
    assert!(hidden.name.starts_with("pipedream.net#") && !hidden.name.contains("s3cr3t"), "{}", hidden.name);
    for port in ["https://example.com:99999/hook", "https://example.com:0/hook"] {
        let error = NotifyTarget::parse(port).expect_err(port);
        assert!(error.contains("port") && !error.contains("hook"), "{error}");
    }
    // Hosts are case-insensitive (and may end in a dot): Slack's is Slack's however written.
    let upper = NotifyTarget::parse("https://HOOKS.SLACK.COM./services/T0/B0/x").expect("upper case");
    assert_eq!(upper.format, PayloadFormat::Slack);
    assert!(upper.name.starts_with("slack.com#"), "{}", upper.name);
    let address = NotifyTarget::parse("http://127.000.000.001/x").expect("an address");
    assert!(address.name.starts_with("127.000.000.001#"), "{}", address.name);
    let deep = NotifyTarget::parse(&format!("http://a.{}.{}/x", "b".repeat(60), "c".repeat(60))).expect("deep");
    assert_eq!(deep.name.chars().count(), 63, "{}", deep.name);
    assert!(NotifyTarget::parse("http://127.0.0.1:+8080/x").is_err(), "a port is digits");
    let long = format!("{}@https://example.com/hook", "n".repeat(64));
    assert!(NotifyTarget::parse(&long).expect_err("a long name").contains("more than 63"));
    assert!(NotifyTarget::parse(&format!("{}@https://example.com/hook", "n".repeat(63))).is_ok());
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

/// The body `payload` would be sent with to a receiver of `format` (on a loopback URL).
fn body(payload: &Payload, format: PayloadFormat) -> serde_json::Value {
    let url = match format {
        PayloadFormat::PagerDuty => "http://127.0.0.1:9/v2/enqueue?routing_key=R0UT1NGKEY0000000000000000000000",
        PayloadFormat::Opsgenie => "http://127.0.0.1:9?api_key=genie-key",
        _ => "http://127.0.0.1:9/hook",
    };
    let target = NotifyTarget::parse(&format!("{}={url}", format.as_str())).expect("target");
    let request = request::request(payload, &target).expect("sent");
    serde_json::from_slice(&request.body).expect("json")
}

#[test]
fn payloads_are_versioned_json_or_slack_text() {
    let awaiting = batch("bookshop-x7k2p", NOW - 100, ready("AwaitingApproval", "ApprovalRequired", NOW - 10));
    let found = due(std::slice::from_ref(&awaiting), &[], at(NOW));
    let payload = Payload::new("prod-eu", "engine-a", &found[0], &awaiting, at(NOW));
    let json: serde_json::Value = body(&payload, PayloadFormat::Json);
    assert_eq!(json["version"], PAYLOAD_VERSION);
    assert_eq!(json["event"], "AwaitingApproval");
    assert_eq!(json["cluster"], "prod-eu");
    assert_eq!(json["batch"], "bookshop-x7k2p");
    assert_eq!(json["key"], "AwaitingApproval");
    let slack: serde_json::Value = body(&payload, PayloadFormat::Slack);
    assert_eq!(slack.as_object().map(|o| o.len()), Some(1), "{slack}");
    let text = slack["text"].as_str().expect("text");
    assert!(text.starts_with("[prod-eu] ns/app: batch bookshop-x7k2p awaits approval"), "{text}");
    assert!(text.contains("capdeck approve ns/bookshop-x7k2p"), "{text}");
}

/// Every string of `value`, however deep.
fn strings(value: &serde_json::Value) -> Vec<&str> {
    match value {
        serde_json::Value::String(text) => vec![text.as_str()],
        serde_json::Value::Array(items) => items.iter().flat_map(strings).collect(),
        serde_json::Value::Object(map) => map.values().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

/// A condition's message can quote what anyone who edits an object wrote (an annotation, a
/// freeze's reason): no receiver gets a newline that forges a line of its own, a terminal escape
/// or a bidirectional override from it, however the format encodes the rest.
#[test]
fn no_receiver_gets_a_control_or_bidi_character_from_the_cluster() {
    let mut status = ready("Failed", "RolloutFailed", NOW - 10);
    status["conditions"][0]["message"] =
        json!("bad\nsecond line\r\n\u{1b}[31mRED\u{7}\u{202e}txet\u{2066} \u{9b}2J <!channel> [x](https://e.example)");
    let failed = batch("bookshop-x7k2p", NOW - 100, status);
    let found = due(std::slice::from_ref(&failed), &[], at(NOW));
    let payload = Payload::new("prod-eu", "engine-a", &found[0], &failed, at(NOW));
    for format in PayloadFormat::ALL {
        let body = body(&payload, format);
        let texts = strings(&body);
        assert!(texts.iter().any(|t| t.contains("second line")), "{format:?} has the message: {body}");
        for text in texts {
            assert!(
                !text.chars().any(|c| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
                "{format:?}: {text:?}"
            );
        }
    }
}

#[test]
fn doctor_counts_recent_records_and_failed_hosts() {
    let mut status = ready("Succeeded", "Succeeded", NOW - 10);
    let mut failed = record("Failed", "Failed", None, NOW - 60);
    failed["failed"] = json!(["hooks.slack.com"]);
    status["notifications"] = json!([failed, record("AwaitingApproval", "AwaitingApproval", None, NOW - 90_000)]);
    let health = recent(records(&batch("b", NOW - 100_000, status)), at(NOW), 24 * 3600);
    assert_eq!(
        health,
        RecentNotifications {
            recorded: 1,
            failed: 1,
            hosts: vec!["hooks.slack.com".into()],
            refused_by: Vec::new(),
            recovered: Vec::new()
        }
    );
}

/// What a batch's incident becomes, state by state: a failure is over when the batch ends
/// otherwise than failed, a deadline once the batch no longer awaits a person; each resolution is
/// due once, and only for an incident the batch opened.
#[test]
fn an_opened_incident_resolves_once_when_its_batch_moves_on() {
    let with = |phase: &str, reason: &str, records: serde_json::Value| {
        let mut status = ready(phase, reason, NOW - 10);
        status["notifications"] = records;
        batch("b", NOW - 100, status)
    };
    let failed = record("Failed", "Failed", None, NOW - 50);
    let held = record("HeldByFailureGuard", "HeldByFailureGuard@0", None, NOW - 50);
    let deadline = record("DeadlineBeforeChangeWindow", "DeadlineBeforeChangeWindow", None, NOW - 50);
    let frozen = record("DeadlineDuringFreeze", "DeadlineDuringFreeze", None, NOW - 20);
    let resolved = |key: &str| record("BatchResolved", key, None, NOW - 30);
    let table = [
        // (phase, reason, records in the order recorded, the resolutions due)
        ("Succeeded", "Succeeded", json!([failed]), vec!["Resolved:failure:1"]),
        ("Undone", "Undone", json!([held]), vec!["Resolved:failure:1"]),
        ("Cancelled", "Cancelled", json!([failed]), vec!["Resolved:failure:1"]),
        ("Failed", "RolloutFailed", json!([failed]), vec![]),
        ("RollingOut", "RollingOut", json!([held]), vec![]),
        ("Succeeded", "Succeeded", json!([failed, resolved("Resolved:failure:1")]), vec![]),
        ("RollingOut", "Approved", json!([deadline]), vec!["Resolved:deadline:1"]),
        ("AwaitingApproval", "DeadlineBeforeChangeWindow", json!([deadline]), vec![]),
        // A person's hold answers nothing: released, the same question is back.
        ("Held", "Held", json!([deadline]), vec![]),
        // Resolved, then opened again (a freeze that ends too late): resolved a second time.
        (
            "RollingOut",
            "Approved",
            json!([deadline, resolved("Resolved:deadline:1"), frozen]),
            vec!["Resolved:deadline:2"],
        ),
        ("RollingOut", "Approved", json!([deadline, frozen, resolved("Resolved:deadline:1")]), vec![]),
        ("Succeeded", "Succeeded", json!([deadline, failed]), vec!["Resolved:failure:1", "Resolved:deadline:1"]),
        ("Succeeded", "Succeeded", json!([record("AwaitingApproval", "AwaitingApproval", None, NOW - 50)]), vec![]),
        ("Succeeded", "Succeeded", json!([]), vec![]),
    ];
    for (phase, reason, records, expected) in table {
        let b = with(phase, reason, records.clone());
        let keys: Vec<String> = due(std::slice::from_ref(&b), &[], at(NOW))
            .into_iter()
            .filter(|d| d.event == Event::BatchResolved)
            .map(|d| d.key)
            .collect();
        assert_eq!(keys, expected, "{phase} with {records}");
    }
    // The resolution closes the incident the opening triggered: one key for both.
    let b = with("Succeeded", "Succeeded", json!([failed]));
    let resolution = due(std::slice::from_ref(&b), &[], at(NOW)).pop().expect("due");
    let payload = Payload::new("prod", "engine-a", &resolution, &b, at(NOW));
    let incident = payload.incident.clone().expect("an incident's");
    assert_eq!(
        (incident.action, incident.key.as_str()),
        (incident::Action::Resolve, "capdeck:prod:ns:batch:b:failure")
    );
    assert!(payload.text.contains("the failure is over"), "{}", payload.text);
    assert!(!payload.text.contains("old credentials"), "succeeded: nothing left on them: {}", payload.text);
    // Undone: resolved with the truth, and the command that rolls forward.
    let b = with("Undone", "Undone", json!([held]));
    let resolution = due(std::slice::from_ref(&b), &[], at(NOW)).pop().expect("due");
    let payload = Payload::new("prod", "engine-a", &resolution, &b, at(NOW));
    assert_eq!(payload.incident.as_ref().map(|i| i.action), Some(incident::Action::Resolve));
    assert!(payload.text.contains("stays on its old credentials until it is rolled forward"), "{}", payload.text);
    assert!(payload.text.ends_with("capdeck retry ns/b --reason … (rolls forward)"), "{}", payload.text);
    let b = with("RollingOut", "Approved", json!([deadline]));
    let resolution = due(std::slice::from_ref(&b), &[], at(NOW)).pop().expect("due");
    let payload = Payload::new("prod", "engine-a", &resolution, &b, at(NOW));
    assert!(payload.text.contains("no decision is waiting any more"), "{}", payload.text);
}

/// PagerDuty, Opsgenie and Teams receivers: given bare keys or URLs with the key in the query,
/// from a flag or from a Secret with the flag's name and format, and never shown.
#[test]
fn incident_and_teams_receivers_parse_without_showing_their_key() {
    let pd = NotifyTarget::parse("pagerduty=R0UT1NGKEYsecret0000000000000000").expect("pagerduty");
    assert_eq!(
        (pd.format, pd.url(), pd.key()),
        (PayloadFormat::PagerDuty, "https://events.pagerduty.com/v2/enqueue", Some("R0UT1NGKEYsecret0000000000000000"))
    );
    assert!(pd.name.starts_with("pagerduty.com#") && !pd.name.contains("secret"), "{}", pd.name);
    let eu = NotifyTarget::parse(
        "pd-eu@pagerduty=https://events.eu.pagerduty.com/v2/enqueue?routing_key=K3Ysecret00000000000000000000000",
    )
    .expect("eu");
    assert_eq!(
        (eu.name.as_str(), eu.url(), eu.key()),
        ("pd-eu", "https://events.eu.pagerduty.com/v2/enqueue", Some("K3Ysecret00000000000000000000000"))
    );
    let og = NotifyTarget::parse("opsgenie=https://api.eu.opsgenie.com?api_key=G3N1Esecret&x=1").expect("opsgenie");
    assert_eq!(
        (og.format, og.url(), og.key()),
        (PayloadFormat::Opsgenie, "https://api.eu.opsgenie.com?x=1", Some("G3N1Esecret"))
    );
    let teams = NotifyTarget::parse(
        "https://prod-01.westeurope.logic.azure.com:443/workflows/abc/triggers/manual/paths/invoke?sig=s3cret",
    )
    .expect("teams");
    assert_eq!(teams.format, PayloadFormat::Teams);
    for target in [&pd, &eu, &og, &teams] {
        assert!(!format!("{target:?}").contains("secret") && !format!("{target:?}").contains("s3cret"), "{target:?}");
    }
    // Two keys of one service are two receivers.
    assert_ne!(pd.name, NotifyTarget::parse("pagerduty=0THERsecret000000000000000000000").expect("other").name);
    // A REST API key (20 characters) where PagerDuty wants an integration's 32: refused at start.
    let rest_key = NotifyTarget::parse("pagerduty=secretRESTkey0000000").expect_err("not a routing key");
    assert!(rest_key.contains("32 letters and digits") && rest_key.contains("20 characters"), "{rest_key}");
    for bad in ["pagerduty=", "pagerduty=two words-secret", "opsgenie=https://api.opsgenie.com?key=secret-token"] {
        let error = NotifyTarget::parse(bad).expect_err(bad);
        assert!(!error.contains("secret"), "{error}");
    }
    // --notify-secret NAME@FORMAT=NS/SECRET:KEY: the Secret holds the bare key.
    let reference: NotifySecretRef = "oncall@pagerduty=ops/pd:routing-key".parse().expect("reference");
    assert_eq!(reference.to_string(), "oncall@pagerduty=ops/pd:routing-key");
    assert_eq!((reference.secret.namespace.as_str(), reference.secret.name.as_str()), ("ops", "pd"));
    let target = reference.target("R0UT1NG0000000000000000000000000\n").expect("target");
    assert_eq!(
        (target.name.as_str(), target.format, target.key()),
        ("oncall", PayloadFormat::PagerDuty, Some("R0UT1NG0000000000000000000000000"))
    );
    // The value may say the same again, not something else.
    assert!(reference.target("oncall@pagerduty=R0UT1NG0000000000000000000000000").is_ok());
    let error = reference.target("slack=https://hooks.slack.com/x").expect_err("two formats");
    assert!(error.contains("slack") && error.contains("pagerduty"), "{error}");
    assert!("ops/pd".parse::<NotifySecretRef>().is_err());
}

/// What each receiver gets for a failure and its resolution: PagerDuty a trigger then a resolve
/// on one dedup key, Opsgenie a create then a close of one alias with its key in the header, Teams
/// an Adaptive Card with the text and the command; an approval wait pages nobody.
#[test]
fn each_receiver_gets_its_own_request() {
    let failed_status = |phase: &str, records: serde_json::Value| {
        let mut status = ready(phase, "RolloutFailed", NOW - 10);
        status["notifications"] = records;
        status
    };
    let b = batch("b", NOW - 100, failed_status("Failed", json!([])));
    let opened = due(std::slice::from_ref(&b), &[], at(NOW)).pop().expect("due");
    let trigger = Payload::new("prod", "engine-a", &opened, &b, at(NOW));
    let b2 = batch("b", NOW - 100, failed_status("Succeeded", json!([record("Failed", "Failed", None, NOW - 50)])));
    let closing = due(std::slice::from_ref(&b2), &[], at(NOW)).pop().expect("due");
    let resolve = Payload::new("prod", "engine-a", &closing, &b2, at(NOW));

    let pd =
        NotifyTarget::parse("pagerduty=http://127.0.0.1:9/v2/enqueue?routing_key=RK000000000000000000000000000000")
            .expect("pd");
    let open = request::request(&trigger, &pd).expect("sent");
    let open_body: serde_json::Value = serde_json::from_slice(&open.body).expect("json");
    // PagerDuty's answer to an unknown routing key is a 400: a refusal there, not elsewhere.
    assert!(open.refusals.contains(&400) && !request::REFUSALS.contains(&400));
    assert_eq!(open.url, "http://127.0.0.1:9/v2/enqueue");
    assert_eq!(
        (open_body["event_action"].as_str(), open_body["routing_key"].as_str()),
        (Some("trigger"), Some("RK000000000000000000000000000000"))
    );
    assert_eq!(open_body["payload"]["severity"], "error");
    let close_body: serde_json::Value =
        serde_json::from_slice(&request::request(&resolve, &pd).expect("sent").body).expect("json");
    assert_eq!(close_body["event_action"], "resolve");
    assert_eq!(close_body["dedup_key"], open_body["dedup_key"]);

    let og = NotifyTarget::parse("opsgenie=http://127.0.0.1:9/?api_key=GK").expect("og");
    let create = request::request(&trigger, &og).expect("sent");
    assert_eq!(create.url, "http://127.0.0.1:9/v2/alerts");
    assert_eq!(create.headers, vec![("authorization", "GenieKey GK".to_string())]);
    assert!(!format!("{create:?}").contains("GK"), "Debug hides the key: {create:?}");
    let close = request::request(&resolve, &og).expect("sent");
    assert_eq!(
        close.url,
        "http://127.0.0.1:9/v2/alerts/capdeck%3Aprod%3Ans%3Abatch%3Ab%3Afailure/close?identifierType=alias"
    );

    let card = body(&trigger, PayloadFormat::Teams);
    let content = &card["attachments"][0]["content"];
    assert_eq!((content["type"].as_str(), content["version"].as_str()), (Some("AdaptiveCard"), Some("1.4")));
    let texts: Vec<&str> =
        content["body"].as_array().expect("body").iter().filter_map(|block| block["text"].as_str()).collect();
    assert_eq!(texts.join(" — "), trigger.text, "the card says what every other receiver says");

    // Not an incident: the generic and chat receivers get it, PagerDuty and Opsgenie do not.
    let awaiting = batch("w", NOW - 100, ready("AwaitingApproval", "ApprovalRequired", NOW - 10));
    let waiting = Payload::new("prod", "e", &due(std::slice::from_ref(&awaiting), &[], at(NOW))[0], &awaiting, at(NOW));
    assert!(request::request(&waiting, &pd).is_none() && request::request(&waiting, &og).is_none());
    assert!(request::request(&waiting, &NotifyTarget::parse("teams=http://127.0.0.1:9/x").expect("t")).is_some());
}

/// A receiver that refused stays refusing for `doctor` until it accepts a later notification
/// that every receiver gets; an approval wait after it (never sent to PagerDuty) proves nothing.
#[test]
fn doctor_sees_a_refusing_receiver_until_it_accepts_again() {
    let mut refused = record("Failed", "Failed", None, NOW - 600);
    refused["failed"] = json!(["oncall"]);
    refused["refused"] = json!(["oncall"]);
    let waiting = record("AwaitingApproval", "AwaitingApproval", None, NOW - 300);
    let health = |written: serde_json::Value| {
        let mut status = ready("Succeeded", "Succeeded", NOW - 10);
        status["notifications"] = written;
        recent(records(&batch("b", NOW - 1000, status)), at(NOW), 24 * 3600)
    };
    let still = health(json!([refused, waiting]));
    assert_eq!((still.refused_by, still.recovered), (vec!["oncall".to_string()], vec![]));
    let resolved = record("BatchResolved", "Resolved:failure:1", None, NOW - 60);
    let again = health(json!([refused, waiting, resolved]));
    assert_eq!((again.refused_by, again.recovered), (vec![], vec!["oncall".to_string()]));
    let mut failed_again = resolved.clone();
    failed_again["failed"] = json!(["oncall"]);
    let not_yet = health(json!([refused, failed_again]));
    assert_eq!(not_yet.refused_by, vec!["oncall".to_string()]);
}

/// What a receiver's text gets wrong is said as such, never repeating it: an unknown format, a
/// name with a space, a key too long or given twice, a bare key without its format. PagerDuty's
/// and Opsgenie's own URLs get their service without a format.
#[test]
fn receiver_mistakes_are_named_and_service_urls_found() {
    let cases = [
        ("pagerdutyy=https://x.example.com/LEAK", "format that does not exist"),
        ("PagerDuty=LEAKKEY", "format that does not exist"),
        ("on call@https://x.example.com/LEAK", "characters other than letters"),
        ("pagerduty=https://events.pagerduty.com/v2/enqueue?routing_key=LEAK&routing_key=LEAK2", "twice"),
        ("justLEAKkey", "a bare routing or API key needs its format"),
    ];
    for (text, said) in cases {
        let error = NotifyTarget::parse(text).expect_err(text);
        assert!(error.contains(said) && !error.contains("LEAK"), "{text}: {error}");
    }
    let long = NotifyTarget::parse(&format!("opsgenie={}", "k".repeat(10_000))).expect_err("long");
    assert!(long.contains("longer than 256") && !long.contains("kkkk"), "{long}");
    let key = "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345";
    let pd = NotifyTarget::parse(&format!("https://events.eu.pagerduty.com/v2/enqueue?routing_key={key}")).expect("pd");
    assert_eq!((pd.format, pd.key()), (PayloadFormat::PagerDuty, Some(key)));
    let og = NotifyTarget::parse("https://api.opsgenie.com/?api_key=0e3e-key").expect("og");
    assert_eq!((og.format, og.key()), (PayloadFormat::Opsgenie, Some("0e3e-key")));
    // --notify-secret: the same words for its own mistakes.
    for (text, said) in [
        ("x@pagerdutyy=ops/pd:key", "format that does not exist"),
        ("on call@pagerduty=ops/pd:key", "characters other than letters"),
        ("ops/Not_A_Name:key", "each a Kubernetes name"),
    ] {
        let error = text.parse::<NotifySecretRef>().expect_err(text);
        assert!(error.contains(said), "{text}: {error}");
    }
}

/// An Opsgenie URL with a query of its own (a proxy's) keeps it after the API's path.
#[test]
fn an_opsgenie_url_keeps_its_query_after_the_api_path() {
    let b = batch("b", NOW - 100, ready("Failed", "RolloutFailed", NOW - 10));
    let opened = due(std::slice::from_ref(&b), &[], at(NOW)).pop().expect("due");
    let trigger = Payload::new("prod", "engine-a", &opened, &b, at(NOW));
    let og = NotifyTarget::parse("opsgenie=http://127.0.0.1:9/prefix?api_key=GK&x=1").expect("og");
    assert_eq!(request::request(&trigger, &og).expect("sent").url, "http://127.0.0.1:9/prefix/v2/alerts?x=1");
}
