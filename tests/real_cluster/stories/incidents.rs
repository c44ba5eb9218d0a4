//! Incident receivers end to end (docs/NOTIFICATIONS.md, issue 48), on both backends: fake
//! PagerDuty, Opsgenie and Teams services on loopback check every request the way the real
//! services document it (JSON Schemas transcribed from their API pages, `tests/fixtures/receivers`,
//! plus the Opsgenie key header) and keep incidents as the services do: a trigger on an open
//! incident's key adds to it, one on a resolved or unknown key opens a new one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use capdeck::actions::{BatchAction, act};
use capdeck::api::BatchPhase;
use capdeck::engine::config::{NotifyConfig, NotifyTarget, RetryPolicy, SigningKey};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use serde_json::{Value, json};

use crate::common::story_world::StoryWorld as _;
use crate::stories::windows::{deadline_before_the_window, start, uaa_bindings};
use crate::world::{Backend, eventually};

const LONG: Duration = Duration::from_secs(90);
/// The Opsgenie API key the fake accepts.
const GENIE_KEY: &str = "0e3e1c5c-genie-key";
const ROUTING_KEY: &str = "R0UT1NGKEY0000000000000000000000";

/// One incident as a service keeps it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Incident {
    /// Incidents opened under this key (a trigger while none is open opens one).
    pub(crate) opened: usize,
    pub(crate) open: bool,
    /// What each request about it said (`trigger`, `resolve`).
    pub(crate) actions: Vec<String>,
}

/// What a fake service saw.
#[derive(Default)]
pub(crate) struct Service {
    pub(crate) incidents: BTreeMap<String, Incident>,
    /// Requests the real service would refuse: why.
    pub(crate) invalid: Vec<String>,
    /// Valid bodies, in order.
    pub(crate) bodies: Vec<Value>,
}

type Shared = Arc<Mutex<Service>>;
/// A fake service's answer.
type Reply = (StatusCode, axum::Json<Value>);

fn validator(schema: &str) -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(schema).expect("a schema");
    jsonschema::options().should_validate_formats(true).build(&schema).expect("a valid schema")
}

/// Why `body` does not follow `schema` (empty: it does).
fn violations(validator: &jsonschema::Validator, body: &[u8]) -> Vec<String> {
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => validator.iter_errors(&value).map(|error| format!("{error} at {}", error.instance_path)).collect(),
        Err(error) => vec![format!("not JSON: {error}")],
    }
}

impl Service {
    fn trigger(&mut self, key: &str) {
        let incident = self.incidents.entry(key.to_string()).or_default();
        if !incident.open {
            incident.opened += 1;
            incident.open = true;
        }
        incident.actions.push("trigger".into());
    }

    fn resolve(&mut self, key: &str) {
        let incident = self.incidents.entry(key.to_string()).or_default();
        incident.open = false;
        incident.actions.push("resolve".into());
    }

    /// A request the real service would refuse: noted, and answered as the service would.
    fn refuse(&mut self, status: StatusCode, why: Vec<String>) -> Reply {
        self.invalid.extend(why.iter().cloned());
        (status, axum::Json(json!({"status": "invalid event", "errors": why})))
    }

    /// `body` as JSON when it follows `schema`; else refused with `status`, as the service would.
    fn valid(&mut self, schema: &jsonschema::Validator, body: &[u8], status: StatusCode) -> Result<Value, Reply> {
        let why = violations(schema, body);
        if why.is_empty() {
            Ok(serde_json::from_slice(body).unwrap_or_default())
        } else {
            Err(self.refuse(status, why))
        }
    }
}

async fn serve(app: axum::Router) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    port
}

/// PagerDuty's Events API v2: `POST /v2/enqueue`, 202 for a valid event, 400 otherwise.
pub(crate) async fn fake_pagerduty() -> (u16, Shared) {
    let shared = Shared::default();
    let schema = Arc::new(validator(include_str!("../../fixtures/receivers/pagerduty-events-v2.schema.json")));
    let app = axum::Router::new()
        .route(
            "/v2/enqueue",
            axum::routing::post(move |State(shared): State<Shared>, body: axum::body::Bytes| async move {
                let mut service = shared.lock().expect("lock");
                let event = match service.valid(&schema, &body, StatusCode::BAD_REQUEST) {
                    Ok(event) => event,
                    Err(refused) => return refused,
                };
                if event["routing_key"] != ROUTING_KEY {
                    return service.refuse(StatusCode::BAD_REQUEST, vec!["unknown routing_key".into()]);
                }
                let key = event["dedup_key"].as_str().unwrap_or_default().to_string();
                match event["event_action"].as_str() {
                    Some("trigger") => service.trigger(&key),
                    _ => service.resolve(&key),
                }
                service.bodies.push(event);
                (StatusCode::ACCEPTED, axum::Json(json!({"status": "success", "dedup_key": key})))
            }),
        )
        .with_state(shared.clone());
    (serve(app).await, shared)
}

/// Opsgenie's Alert API: `POST /v2/alerts` and `POST /v2/alerts/{alias}/close?identifierType=alias`,
/// both with `Authorization: GenieKey KEY` (401 without the right one), 202 when valid, 422 not.
pub(crate) async fn fake_opsgenie() -> (u16, Shared) {
    let shared = Shared::default();
    let create = Arc::new(validator(include_str!("../../fixtures/receivers/opsgenie-create-alert.schema.json")));
    let close = Arc::new(validator(include_str!("../../fixtures/receivers/opsgenie-close-alert.schema.json")));
    let authorized = |headers: &HeaderMap| {
        headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("GenieKey {GENIE_KEY}"))
    };
    let unauthorized = || (StatusCode::UNAUTHORIZED, axum::Json(json!({"message": "Could not authenticate"})));
    let app = axum::Router::new()
        .route(
            "/v2/alerts",
            axum::routing::post(
                move |State(shared): State<Shared>, headers: HeaderMap, body: axum::body::Bytes| async move {
                    if !authorized(&headers) {
                        return unauthorized();
                    }
                    let mut service = shared.lock().expect("lock");
                    let alert = match service.valid(&create, &body, StatusCode::UNPROCESSABLE_ENTITY) {
                        Ok(alert) => alert,
                        Err(refused) => return refused,
                    };
                    service.trigger(alert["alias"].as_str().unwrap_or_default());
                    service.bodies.push(alert);
                    (StatusCode::ACCEPTED, axum::Json(json!({"result": "Request will be processed"})))
                },
            ),
        )
        .route(
            "/v2/alerts/{alias}/close",
            axum::routing::post(
                move |State(shared): State<Shared>,
                      Path(alias): Path<String>,
                      Query(query): Query<BTreeMap<String, String>>,
                      headers: HeaderMap,
                      body: axum::body::Bytes| async move {
                    if !authorized(&headers) {
                        return unauthorized();
                    }
                    let mut service = shared.lock().expect("lock");
                    let mut why = violations(&close, &body);
                    if query.get("identifierType").map(String::as_str) != Some("alias") {
                        why.push(format!("close by alias needs identifierType=alias, got {query:?}"));
                    }
                    if !why.is_empty() {
                        return service.refuse(StatusCode::UNPROCESSABLE_ENTITY, why);
                    }
                    service.resolve(&alias);
                    service.bodies.push(serde_json::from_slice(&body).unwrap_or_default());
                    (StatusCode::ACCEPTED, axum::Json(json!({"result": "Request will be processed"})))
                },
            ),
        )
        .with_state(shared.clone());
    (serve(app).await, shared)
}

/// A Teams Workflows webhook: 202 for a message with a valid Adaptive Card, 400 otherwise.
pub(crate) async fn fake_teams() -> (u16, Shared) {
    let shared = Shared::default();
    let schema = Arc::new(validator(include_str!("../../fixtures/receivers/teams-workflow-message.schema.json")));
    let app = axum::Router::new()
        .route(
            "/workflows/capdeck/triggers/manual/paths/invoke",
            axum::routing::post(move |State(shared): State<Shared>, body: axum::body::Bytes| async move {
                let mut service = shared.lock().expect("lock");
                match service.valid(&schema, &body, StatusCode::BAD_REQUEST) {
                    Ok(card) => service.bodies.push(card),
                    Err(refused) => return refused,
                }
                (StatusCode::ACCEPTED, axum::Json(json!({})))
            }),
        )
        .with_state(shared.clone());
    (serve(app).await, shared)
}

/// What a generic JSON receiver got: each request's headers and body.
type Deliveries = Arc<Mutex<Vec<(HeaderMap, Vec<u8>)>>>;

/// A generic JSON receiver that keeps each request's Standard Webhooks headers and body.
async fn signed_receiver() -> (u16, Deliveries) {
    let received = Deliveries::default();
    let app = axum::Router::new()
        .route(
            "/hook",
            axum::routing::post(
                |State(received): State<Deliveries>, headers: HeaderMap, body: axum::body::Bytes| async move {
                    received.lock().expect("lock").push((headers, body.to_vec()));
                    StatusCode::NO_CONTENT
                },
            ),
        )
        .with_state(received.clone());
    (serve(app).await, received)
}

/// Whether `headers` sign `body` with `key` as Standard Webhooks says: `v1,` and the base64 of
/// HMAC-SHA256 over `id.timestamp.body` (computed here with the hmac crate, not capdeck's code).
fn signed_with(key: &[u8], headers: &HeaderMap, body: &[u8]) -> bool {
    use base64::Engine as _;
    use hmac::Mac as _;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("any key length");
    mac.update(format!("{}.{}.", header("webhook-id"), header("webhook-timestamp")).as_bytes());
    mac.update(body);
    let expected = format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()));
    header("webhook-signature").split(' ').any(|signature| signature == expected)
}

/// The incidents a fake service keeps, by key (PagerDuty's `dedup_key`, Opsgenie's `alias`).
fn incident_keys(service: &Mutex<Service>) -> BTreeMap<String, Incident> {
    service.lock().expect("lock").incidents.clone()
}

/// The old credentials die before the application's next change window: the batch asks a person
/// (`DeadlineBeforeChangeWindow`), and its credentials are unsafe. Engine A opens both incidents
/// in PagerDuty and Opsgenie and posts Teams cards; an Opsgenie receiver with a wrong key refuses
/// (401: noted on the record by name, the refusing gauge 1, `capdeck doctor` FAILs). A stops;
/// engine B leads, and the approval resolves the deadline's incident from B, a longer overlap the
/// credentials'. At the end every service has each incident opened once and resolved, every
/// request was valid for its service, and no engine sent a key or URL anywhere.
pub async fn incidents_open_and_resolve_once_across_a_leader_change(backend: Backend) {
    let world = deadline_before_the_window(backend, "incidents").await;
    let ns = world.ns.clone();
    let (pd_port, pagerduty) = fake_pagerduty().await;
    let (og_port, opsgenie) = fake_opsgenie().await;
    let (teams_port, teams) = fake_teams().await;
    let (json_port, signed) = signed_receiver().await;
    let signing_key = b"a-signing-secret-of-32-bytes-len";
    let notify = NotifyConfig {
        targets: vec![
            NotifyTarget::parse(&format!(
                "oncall@pagerduty=http://127.0.0.1:{pd_port}/v2/enqueue?routing_key={ROUTING_KEY}"
            ))
            .expect("pagerduty"),
            NotifyTarget::parse(&format!("ops@opsgenie=http://127.0.0.1:{og_port}?api_key={GENIE_KEY}")).expect("og"),
            NotifyTarget::parse(&format!("og-wrong@opsgenie=http://127.0.0.1:{og_port}?api_key=revoked-key"))
                .expect("og with a wrong key"),
            NotifyTarget::parse(&format!(
                "channel@teams=http://127.0.0.1:{teams_port}/workflows/capdeck/triggers/manual/paths/invoke?sig=s1g"
            ))
            .expect("teams"),
            NotifyTarget::parse(&format!("audit@json=http://127.0.0.1:{json_port}/hook")).expect("json"),
        ],
        cluster: "incident-story".into(),
        signing: Some(SigningKey::parse(signing_key).expect("key")),
        retry: RetryPolicy {
            attempts: 3,
            attempt_timeout: Duration::from_secs(10),
            first_backoff: Duration::from_millis(200),
        },
    };
    let workloads = world.workloads();
    let a = start(&world, "engine-a", |config| config.notify = notify.clone()).await;
    let stores = a.stores.clone();
    eventually("the engine sees the ServiceBindings", LONG, || async {
        stores.service_bindings().is_some_and(|bindings| bindings.len() == 2)
    })
    .await;
    world.rotate_secret("bookshop-uaa").await;
    let batch = world.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await.name_any();
    let deadline_key = format!("capdeck:incident-story:{ns}:batch:{batch}:deadline");
    eventually("the deadline incident open in PagerDuty and Opsgenie, the wrong key refused", LONG, || async {
        let (pd, og) = (incident_keys(&pagerduty), incident_keys(&opsgenie));
        let refused = world
            .batches("bookshop")
            .await
            .pop()
            .and_then(|b| b.status)
            .map(|s| s.notifications)
            .unwrap_or_default()
            .iter()
            .any(|r| r.event == "DeadlineBeforeChangeWindow" && r.refused == ["og-wrong"]);
        match (pd.get(&deadline_key), og.get(&deadline_key)) {
            (Some(p), Some(o)) if p.open && o.open && refused => Ok(()),
            _ => Err(format!("pagerduty {pd:?}, opsgenie {og:?}, refusal noted {refused}")),
        }
    })
    .await;
    let metrics = a.metrics_text();
    assert!(metrics.contains("capdeck_notification_receiver_refusing{receiver=\"og-wrong\"} 1"), "{metrics}");
    assert!(metrics.contains("capdeck_notification_receiver_refusing{receiver=\"ops\"} 0"), "{metrics}");
    let doctor = crate::setup::capdeck(
        &world.admin_kubeconfig,
        &["doctor", "-n", ns.as_str(), "--lease-namespace", ns.as_str()],
    );
    let report = format!("{}{}", String::from_utf8_lossy(&doctor.stdout), String::from_utf8_lossy(&doctor.stderr));
    let line = report.lines().find(|line| line.starts_with("notifications")).unwrap_or_default();
    assert!(line.contains("FAIL") && line.contains("og-wrong refused"), "{report}");

    // Leader change: A stops, B leads and sends nothing A sent.
    a.stop().await;
    let b = start(&world, "engine-b", |config| config.notify = notify.clone()).await;
    act(
        &world.client,
        &ns,
        &batch,
        BatchAction::Approve,
        "alice",
        Some("CHG-9: roll before they die"),
        Timestamp::now(),
    )
    .await
    .expect("approve");
    world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    // The Pods run the new credentials, yet the Secret stays unsafe: its next rotation would again
    // leave 30 min of overlap before a window two days away. The SRE lengthens the overlap beyond
    // the weekly window's period (10 days), and the credentials incident resolves too.
    uaa_bindings(&world, "240h").await;
    eventually("every incident resolved in PagerDuty and Opsgenie", LONG, || async {
        let (pd, og) = (incident_keys(&pagerduty), incident_keys(&opsgenie));
        let resolved = |incidents: &BTreeMap<String, Incident>| {
            incidents.get(&deadline_key).is_some_and(|i| !i.open) && incidents.values().all(|i| !i.open)
        };
        if resolved(&pd) && resolved(&og) {
            Ok(())
        } else {
            let said = crate::setup::capdeck(&world.admin_kubeconfig, &["credentials", "-n", ns.as_str()]);
            Err(format!(
                "pagerduty {pd:?}, opsgenie {og:?}; capdeck credentials: {}",
                String::from_utf8_lossy(&said.stdout)
            ))
        }
    })
    .await;
    for (service, incidents) in [("PagerDuty", incident_keys(&pagerduty)), ("Opsgenie", incident_keys(&opsgenie))] {
        for (key, incident) in &incidents {
            assert_eq!(incident.opened, 1, "{service}: {key} opened once, across the leader change: {incident:?}");
            let resolves = incident.actions.iter().filter(|action| *action == "resolve").count();
            assert_eq!(resolves, 1, "{service}: {key} resolved once: {incident:?}");
        }
        // Neither engine sent the escalation twice: one trigger, then one resolve.
        assert_eq!(incidents[&deadline_key].actions, ["trigger", "resolve"], "{service}");
    }
    let records =
        world.batches("bookshop").await.pop().and_then(|b| b.status).map(|s| s.notifications).unwrap_or_default();
    let by: Vec<(&str, &str)> = records.iter().map(|r| (r.key.as_str(), r.by.as_str())).collect();
    let resolved_by_b = by.iter().any(|(key, engine)| key.starts_with("CredentialsResolved:") && *engine == "engine-b");
    assert!(
        by.contains(&("DeadlineBeforeChangeWindow", "engine-a"))
            && by.contains(&("Resolved:deadline:1", "engine-b"))
            && resolved_by_b,
        "{by:?}"
    );
    for (name, service) in [("PagerDuty", &pagerduty), ("Opsgenie", &opsgenie), ("Teams", &teams)] {
        let service = service.lock().expect("lock");
        assert!(service.invalid.is_empty(), "{name} would refuse: {:?}", service.invalid);
        let bodies = serde_json::to_string(&service.bodies).expect("json");
        assert!(
            !bodies.contains(GENIE_KEY) && !bodies.contains("s1g") && !bodies.contains("first-secret"),
            "{name}: {bodies}"
        );
    }
    // Teams got the escalation (what, where, deadline, the command) and its resolution.
    let cards = teams.lock().expect("lock").bodies.clone();
    let texts: Vec<String> = cards
        .iter()
        .map(|card| {
            card["attachments"][0]["content"]["body"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|block| block["text"].as_str())
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("cannot wait for its window") && t.contains(&format!("capdeck approve {ns}/{batch}"))),
        "{texts:?}"
    );
    assert!(texts.iter().any(|t| t.contains("no decision is waiting any more")), "{texts:?}");
    // The generic receiver got every event, each signed with the key (and one id per transition).
    let signed = signed.lock().expect("lock").clone();
    assert!(signed.len() >= 4, "the escalation, the credentials and both resolutions: {}", signed.len());
    for (headers, body) in &signed {
        assert!(signed_with(signing_key, headers, body), "a delivery not signed with the key: {headers:?}");
        assert!(!signed_with(b"another-signing-secret-of-32-byte", headers, body));
    }
    let ids: std::collections::BTreeSet<_> = signed.iter().filter_map(|(h, _)| h.get("webhook-id")).collect();
    assert_eq!(ids.len(), signed.len(), "one id per transition");
    let metrics = b.metrics_text();
    assert!(!metrics.contains(GENIE_KEY) && !metrics.contains(ROUTING_KEY), "{metrics}");
    b.stop().await;
    workloads.stop().await;
}
