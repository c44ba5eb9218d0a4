//! What each kind of receiver is sent for one notification: the generic JSON, Slack's text, a
//! Teams Adaptive Card, a PagerDuty Events API v2 event, an Opsgenie Alert API call. Each as
//! its service documents it (docs/NOTIFICATIONS.md links the pages; the stories check the
//! bodies against JSON Schemas transcribed from them). Never a credential in a body: Secret names,
//! verdicts and reasons only.

use serde_json::{Value, json};

use super::Payload;
use super::incident::Action;
use crate::api::common::clipped;
use crate::engine::config::{NotifyTarget, PayloadFormat};

/// One HTTP POST to a receiver.
#[derive(Clone, PartialEq, Eq)]
pub struct Request {
    pub url: String,
    /// Headers beyond content type and user agent (Opsgenie's `Authorization`).
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// Whether `--notify-signing-secret` signs it (the generic JSON only).
    pub signed: bool,
    /// The answers that mean the receiver refuses capdeck itself (its URL or key is wrong,
    /// revoked or gone): not retried, and said by the gauge, the record and `capdeck doctor`.
    pub refusals: &'static [u16],
}

/// What a webhook answers when its URL or token is wrong, revoked or gone.
pub const REFUSALS: &[u16] = &[401, 403, 404, 410];
/// PagerDuty answers an unknown routing key with 400 ("Invalid routing key"); capdeck's events
/// follow its schema (the stories check them), so a 400 there is a key that does not work.
const PAGERDUTY_REFUSALS: &[u16] = &[400, 401, 403, 404, 410];

impl std::fmt::Debug for Request {
    /// Without the URL and headers: they hold the receiver's credential.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Request({} bytes)", self.body.len())
    }
}

/// Where the generic JSON says which program sent it, and PagerDuty and Opsgenie show it.
const SOURCE: &str = "capdeck";
/// Opsgenie's longest `message`.
const OPSGENIE_MESSAGE: usize = 130;

/// The request for `target`, or `None` when it does not take this event (an incident service
/// gets only the events that open or close an incident).
pub fn request(payload: &Payload, target: &NotifyTarget) -> Option<Request> {
    let plain = |body: Value, signed| Request {
        url: target.url().to_string(),
        headers: Vec::new(),
        body: to_vec(&body),
        signed,
        refusals: if target.format == PayloadFormat::PagerDuty { PAGERDUTY_REFUSALS } else { REFUSALS },
    };
    match target.format {
        PayloadFormat::Json => Some(plain(serde_json::to_value(payload).unwrap_or_default(), true)),
        PayloadFormat::Slack => Some(plain(json!({ "text": slack_text(&payload.text) }), false)),
        PayloadFormat::Teams => Some(plain(teams_card(payload), false)),
        PayloadFormat::PagerDuty => Some(plain(pagerduty_event(payload, target.key().unwrap_or_default())?, false)),
        PayloadFormat::Opsgenie => opsgenie(payload, target),
    }
}

fn to_vec(body: &Value) -> Vec<u8> {
    serde_json::to_vec(body).unwrap_or_default()
}

/// A PagerDuty Events API v2 event: `trigger` with a payload, or `resolve` by `dedup_key`.
fn pagerduty_event(payload: &Payload, routing_key: &str) -> Option<Value> {
    let incident = payload.incident.as_ref()?;
    Some(match incident.action {
        Action::Trigger => json!({
            "routing_key": routing_key,
            "event_action": "trigger",
            "dedup_key": incident.key,
            "client": SOURCE,
            "payload": {
                "summary": clipped(&payload.text, 1024),
                "source": format!("{}/{}", payload.cluster, payload.namespace),
                "severity": payload.severity.as_str(),
                "timestamp": payload.at.to_string(),
                "component": payload.application,
                "group": payload.namespace,
                "class": payload.event,
                "custom_details": details(payload),
            },
        }),
        Action::Resolve => json!({
            "routing_key": routing_key,
            "event_action": "resolve",
            "dedup_key": incident.key,
        }),
    })
}

/// Opsgenie's Alert API: create an alert with the incident's key as its `alias` (an open alert
/// of that alias is not created twice), or close the alert of that alias.
fn opsgenie(payload: &Payload, target: &NotifyTarget) -> Option<Request> {
    let incident = payload.incident.as_ref()?;
    // The URL may carry a query of its own (a proxy's): the API's path goes before it.
    let (base, query) = target.url().split_once('?').unwrap_or((target.url(), ""));
    let base = base.trim_end_matches('/');
    let and_query = |url: String| match (query.is_empty(), url.contains('?')) {
        (true, _) => url,
        (false, true) => format!("{url}&{query}"),
        (false, false) => format!("{url}?{query}"),
    };
    let headers = vec![("authorization", format!("GenieKey {}", target.key().unwrap_or_default()))];
    let (url, body) = match incident.action {
        Action::Trigger => {
            let body = json!({
                "message": clipped(&payload.text, OPSGENIE_MESSAGE),
                "alias": incident.key,
                "description": clipped(&payload.text, 15_000),
                "priority": payload.severity.opsgenie_priority(),
                "source": SOURCE,
                "entity": clipped(&format!("{}/{}", payload.namespace, payload.application), 512),
                "tags": ["capdeck", payload.event],
                "details": details(payload),
            });
            (and_query(format!("{base}/v2/alerts")), body)
        }
        Action::Resolve => {
            let alias: String = form_urlencoded::byte_serialize(incident.key.as_bytes()).collect();
            let body = json!({ "source": SOURCE, "user": SOURCE, "note": clipped(&payload.text, 25_000) });
            (and_query(format!("{base}/v2/alerts/{alias}/close?identifierType=alias")), body)
        }
    };
    Some(Request { url, headers, body: to_vec(&body), signed: false, refusals: REFUSALS })
}

/// The facts a person needs beside the text, in this order: where, which batch or Secret, the
/// deadline (empty ones left out).
fn facts(payload: &Payload) -> Vec<(&'static str, String)> {
    let deadline = payload.deadline.map(|at| at.to_string()).unwrap_or_default();
    [
        ("event", payload.event.to_string()),
        ("cluster", payload.cluster.clone()),
        ("namespace", payload.namespace.clone()),
        ("application", payload.application.clone()),
        ("batch", payload.batch.clone()),
        ("state", payload.state.clone()),
        ("secret", payload.secret.clone().unwrap_or_default()),
        ("verdict", payload.verdict.clone().unwrap_or_default()),
        ("deadline", deadline),
        ("engine", payload.engine.clone()),
    ]
    .into_iter()
    .filter(|(_, value)| !value.is_empty())
    .collect()
}

/// The facts as one JSON object of strings (PagerDuty's `custom_details`, Opsgenie's `details`).
fn details(payload: &Payload) -> Value {
    Value::Object(facts(payload).into_iter().map(|(name, value)| (name.to_string(), Value::String(value))).collect())
}

/// Slack's own markup is `<…>` (links, `<!channel>`) with `&` escaping it: its documentation asks
/// senders to escape these three, so text from the cluster (an annotation quoted in a reason)
/// can neither ping a channel nor make a link.
fn slack_text(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A card's text is Markdown in Teams: a link needs `](` together, so text from the cluster
/// cannot make one (a bare URL stays what it says).
fn teams_text(text: &str) -> String {
    text.replace("](", "] (")
}

/// A Teams Workflows webhook's message: one Adaptive Card (1.4, the version Teams renders
/// everywhere) with the text of every other receiver, the facts, and the command on its own line.
fn teams_card(payload: &Payload) -> Value {
    let (what, command) = payload.what_and_command();
    let color = match payload.severity {
        super::incident::Severity::Critical | super::incident::Severity::Error => "Attention",
        super::incident::Severity::Warning => "Warning",
        super::incident::Severity::Info => "Default",
    };
    let facts: Vec<Value> = facts(payload)
        .into_iter()
        .filter(|(name, _)| *name != "engine")
        .map(|(name, value)| json!({ "title": name, "value": teams_text(&value) }))
        .collect();
    let mut body = vec![
        json!({ "type": "TextBlock", "text": teams_text(&what), "wrap": true, "weight": "Bolder", "color": color }),
        json!({ "type": "FactSet", "facts": facts }),
    ];
    if let Some(command) = command {
        body.push(json!({ "type": "TextBlock", "text": teams_text(&command), "wrap": true, "fontType": "Monospace" }));
    }
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.4",
                "body": body,
            },
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text from the cluster can neither ping nor link in Slack, nor link in Teams.
    #[test]
    fn markup_from_the_cluster_is_neutralized() {
        let hostile = "<!channel> <https://evil.example|re-auth> [Click](https://evil.example/x) & more";
        let slack = slack_text(hostile);
        assert!(!slack.contains('<') && !slack.contains('>') && slack.contains("&amp; more"), "{slack}");
        assert!(!teams_text(hostile).contains("]("), "{}", teams_text(hostile));
    }

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(clipped("abc", 3), "abc");
        assert_eq!(clipped("äöüß", 3), "äö…");
        assert_eq!(clipped("a\u{1b}[31mb", 20), "a\u{FFFD}[31mb", "a control character from the cluster");
        assert_eq!(clipped(&"x".repeat(200), OPSGENIE_MESSAGE).chars().count(), OPSGENIE_MESSAGE);
    }
}
