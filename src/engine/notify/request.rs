//! What each kind of receiver is sent for one notification: the generic JSON, Slack's text, a
//! Teams Adaptive Card, a PagerDuty Events API v2 event, an Opsgenie Alert API call. Each as
//! its service documents it (docs/NOTIFICATIONS.md links the pages; the stories check the
//! bodies against JSON Schemas transcribed from them). Never a credential in a body: Secret names,
//! verdicts and reasons only.

use serde_json::{Value, json};

use super::Payload;
use super::incident::Action;
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
        PayloadFormat::Slack => Some(plain(json!({ "text": payload.text }), false)),
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
                "summary": truncate(&payload.text, 1024),
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
    let base = target.url().trim_end_matches('/');
    let headers = vec![("authorization", format!("GenieKey {}", target.key().unwrap_or_default()))];
    let (url, body) = match incident.action {
        Action::Trigger => {
            let details: serde_json::Map<String, Value> = details(payload)
                .as_object()
                .into_iter()
                .flatten()
                .map(|(name, value)| {
                    (name.clone(), Value::String(value.as_str().map_or_else(|| value.to_string(), str::to_string)))
                })
                .collect();
            let body = json!({
                "message": truncate(&payload.text, OPSGENIE_MESSAGE),
                "alias": incident.key,
                "description": truncate(&payload.text, 15_000),
                "priority": payload.severity.opsgenie_priority(),
                "source": SOURCE,
                "entity": truncate(&format!("{}/{}", payload.namespace, payload.application), 512),
                "tags": ["capdeck", payload.event],
                "details": details,
            });
            (format!("{base}/v2/alerts"), body)
        }
        Action::Resolve => {
            let alias: String = form_urlencoded::byte_serialize(incident.key.as_bytes()).collect();
            let body = json!({ "source": SOURCE, "user": SOURCE, "note": truncate(&payload.text, 25_000) });
            (format!("{base}/v2/alerts/{alias}/close?identifierType=alias"), body)
        }
    };
    Some(Request { url, headers, body: to_vec(&body), signed: false, refusals: REFUSALS })
}

/// The facts a person needs beside the text: where, which batch or Secret, the deadline.
fn details(payload: &Payload) -> Value {
    let mut facts = serde_json::Map::new();
    let mut put = |name: &str, value: &str| {
        if !value.is_empty() {
            facts.insert(name.to_string(), Value::String(value.to_string()));
        }
    };
    put("event", payload.event);
    put("cluster", &payload.cluster);
    put("namespace", &payload.namespace);
    put("application", &payload.application);
    put("batch", &payload.batch);
    put("state", &payload.state);
    put("secret", payload.secret.as_deref().unwrap_or_default());
    put("verdict", payload.verdict.as_deref().unwrap_or_default());
    put("deadline", &payload.deadline.map(|at| at.to_string()).unwrap_or_default());
    put("engine", &payload.engine);
    Value::Object(facts)
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
    let facts: Vec<Value> = details(payload)
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, _)| name.as_str() != "engine")
        .map(|(name, value)| json!({ "title": name, "value": value }))
        .collect();
    let mut body = vec![
        json!({ "type": "TextBlock", "text": what, "wrap": true, "weight": "Bolder", "color": color }),
        json!({ "type": "FactSet", "facts": facts }),
    ];
    if let Some(command) = command {
        body.push(json!({ "type": "TextBlock", "text": command, "wrap": true, "fontType": "Monospace" }));
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

/// At most `max` characters of `text` (an ellipsis ends a cut one).
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("äöüß", 3), "äö…");
        assert_eq!(truncate(&"x".repeat(200), OPSGENIE_MESSAGE).chars().count(), OPSGENIE_MESSAGE);
    }
}
