//! The events view's rows: the Events of the CAP objects and the batches.

use std::sync::Arc;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

#[derive(Clone, Debug)]
pub struct EventRow {
    pub namespace: String,
    pub application: String,
    pub warning: bool,
    pub reason: String,
    pub note: String,
    pub time: Option<Timestamp>,
    pub controller: String,
}

pub(super) fn event_rows(events: &[Arc<Event>]) -> Vec<EventRow> {
    let mut event_rows: Vec<EventRow> = events
        .iter()
        .map(|event| EventRow {
            namespace: event.namespace().unwrap_or_default(),
            application: event.regarding.as_ref().and_then(|r| r.name.clone()).unwrap_or_default(),
            warning: event.type_.as_deref() == Some("Warning"),
            reason: event.reason.clone().unwrap_or_default(),
            note: event.note.clone().unwrap_or_default(),
            time: event
                .event_time
                .as_ref()
                .map(|t| t.0)
                .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0)),
            controller: event.reporting_controller.clone().unwrap_or_default(),
        })
        .collect();
    event_rows.sort_by_key(|row| std::cmp::Reverse(row.time));

    event_rows
}
