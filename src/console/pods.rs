//! The Pods pane: Enter on a rollout row shows that Deployment's ReplicaSets and Pods (state,
//! ready, restarts, how the containers last ended, the VCAP Secret each ReplicaSet reads), read
//! when it opens and every few seconds while it stays open; `l` shows a Pod's last log lines.
//! The state lives here; `draw` renders it.

use k8s_openapi::jiff::Timestamp;

use crate::readmodel::pods::{LOG_LINES, PodRow};

/// While the pane is open its rows are read again this often.
pub const REFRESH_SECONDS: i64 = 5;

pub struct PodsPane {
    pub namespace: String,
    pub deployment: String,
    /// `None` until the first answer.
    pub rows: Option<Result<Vec<PodRow>, String>>,
    pub selected: usize,
    /// When the rows were last asked for; a read is under way while `loading`.
    pub asked_at: Timestamp,
    pub loading: bool,
    pub log: Option<LogPane>,
}

pub struct LogPane {
    pub pod: String,
    pub container: Option<String>,
    /// `None` while reading.
    pub lines: Option<Result<Vec<String>, String>>,
    /// The first line in view; `None` follows the end (the newest lines).
    pub scroll: Option<usize>,
}

impl PodsPane {
    pub fn new(namespace: String, deployment: String, now: Timestamp) -> Self {
        Self { namespace, deployment, rows: None, selected: 0, asked_at: now, loading: true, log: None }
    }

    pub fn title(&self) -> String {
        format!("Pods of Deployment {}/{}", self.namespace, self.deployment)
    }

    pub fn selected_row(&self) -> Option<&PodRow> {
        self.rows.as_ref()?.as_ref().ok()?.get(self.selected)
    }

    pub fn row_count(&self) -> usize {
        self.rows.as_ref().and_then(|rows| rows.as_ref().ok()).map_or(0, Vec::len)
    }

    /// Time to read the rows again.
    pub fn due(&self, now: Timestamp) -> bool {
        !self.loading && now.as_second() - self.asked_at.as_second() >= REFRESH_SECONDS
    }
}

impl LogPane {
    pub fn title(&self) -> String {
        match &self.container {
            Some(container) => format!("Log of Pod {} ({container}), last {LOG_LINES} lines", self.pod),
            None => format!("Log of Pod {}, last {LOG_LINES} lines", self.pod),
        }
    }
}
