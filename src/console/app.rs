//! The console's state: one owner (the UI task), changed only by `update`, read by `draw`.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use super::keymap::Keymap;
use super::overlay::Overlay;
use super::overlay::command_line::Input;
use super::theme::Theme;
use crate::cluster::stores::ConnectionState;
use crate::engine::Role;
use crate::readmodel::Snapshot;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViewKind {
    Applications,
    Versions,
    Tenants,
    Operations,
    Batches,
    Rollouts,
    Events,
    Credentials,
    Fleet,
}

impl ViewKind {
    /// The store this view lists (by the name `cluster::stores` tracks it under), which the
    /// console lists before any other; `None` for views drawn from several.
    pub fn store_kind(self) -> Option<&'static str> {
        match self {
            Self::Applications => Some("CAPApplication"),
            Self::Versions => Some("CAPApplicationVersion"),
            Self::Tenants => Some("CAPTenant"),
            Self::Operations => Some("CAPTenantOperation"),
            Self::Batches | Self::Rollouts => Some("RotationBatch"),
            Self::Events => Some("Event"),
            Self::Credentials | Self::Fleet => None,
        }
    }

    pub const ALL: [Self; 9] = [
        Self::Applications,
        Self::Versions,
        Self::Tenants,
        Self::Operations,
        Self::Batches,
        Self::Rollouts,
        Self::Events,
        Self::Credentials,
        Self::Fleet,
    ];
}

/// What a view is narrowed to after a drill-down.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Focus {
    Application { namespace: String, name: String },
    Version { namespace: String, name: String },
    Tenant { namespace: String, name: String },
    Batch { namespace: String, name: String },
}

impl Focus {
    pub fn label(&self) -> String {
        match self {
            Self::Application { namespace, name } => format!("app {namespace}/{name}"),
            Self::Version { namespace, name } => format!("version {namespace}/{name}"),
            Self::Tenant { namespace, name } => format!("tenant {namespace}/{name}"),
            Self::Batch { namespace, name } => format!("batch {namespace}/{name}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Route {
    pub view: ViewKind,
    pub focus: Option<Focus>,
}

/// Selection and scroll of one route.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    pub selected: usize,
    pub offset: usize,
    /// (namespace, name) of the selected row, to keep it selected when data changes.
    pub key: Option<RowKey>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    Warning,
    Error,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flash {
    pub text: String,
    pub level: Level,
    pub at: Timestamp,
}

/// A view's sort: by which column (index into its columns), which way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    pub column: usize,
    pub descending: bool,
}

impl Sort {
    /// `s`: by the next of `columns` columns, ascending; after the last, unsorted.
    pub fn next(current: Option<Self>, columns: usize) -> Option<Self> {
        let column = match current {
            None => 0,
            Some(sort) if sort.column + 1 < columns => sort.column + 1,
            Some(_) => return None,
        };
        Some(Self { column, descending: false })
    }

    /// `S`: the other way round (unsorted: the first column, descending).
    pub fn reversed(current: Option<Self>) -> Self {
        match current {
            Some(sort) => Self { descending: !sort.descending, ..sort },
            None => Self { column: 0, descending: true },
        }
    }
}

/// A row's identity in its view, to keep it selected when the data changes: the object's
/// `namespace/name`, or for rows that are not one object what makes them one (the fleet's
/// context and namespace, a rollout's batch and Deployment).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowKey(String);

impl RowKey {
    /// The row of one object.
    pub fn object(namespace: &str, name: &str) -> Self {
        Self(format!("{namespace}/{name}"))
    }

    /// The row made of `parts` (joined with a character no name holds).
    pub fn of(parts: &[&str]) -> Self {
        Self(parts.join("\u{1f}"))
    }
}

/// Facts about the session shown in the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The API server's URL (named when it cannot be reached).
    pub server: String,
    pub context: String,
    pub scope: String,
    pub user: Option<String>,
    pub readonly: bool,
    /// `--demo`: where the sandbox kubeconfig was written (shown in help).
    pub demo_kubeconfig: Option<String>,
    /// Where the log files go (shown in help).
    pub log_dir: Option<String>,
}

pub struct App {
    pub snapshot: Arc<Snapshot>,
    pub route: Route,
    pub back: Vec<Route>,
    pub cursors: HashMap<Route, Cursor>,
    /// Row indexes (into the snapshot's list for the route's view) that pass focus and filter.
    pub visible: Vec<usize>,
    pub filter: String,
    /// Why the filter is not used as a regular expression (shown in the title line).
    pub filter_error: Option<String>,
    pub input: Input,
    pub overlay: Overlay,
    pub session: Session,
    pub role: Role,
    /// Who holds the engine's Lease (polled while the console runs), or why it is unknown.
    pub leader: Option<crate::leadership::LeaderView>,
    /// The attached engine's last failed write, while it lasts.
    pub write_failure: Option<String>,
    /// The Lease (`ns/name`) of a Go CAP Operator that is running, if one is.
    pub go_operator: Option<String>,
    pub connection: ConnectionState,
    /// Per kind of write and namespace: whether this user may write there.
    pub access: super::user_write::AccessMap,
    /// The namespace of this console's engine's Lease: where a cluster Freeze counts when no
    /// leading engine says otherwise.
    pub lease_namespace: Option<String>,
    pub flash: Option<Flash>,
    pub theme: Theme,
    pub theme_names: Vec<String>,
    pub keymap: Keymap,
    pub now: Timestamp,
    /// Table rows that fit on screen (from the last resize), for paging and scrolling.
    pub viewport_rows: usize,
    /// The terminal's height (from the last resize), for scrolling the popups.
    pub viewport_height: u16,
    /// The terminal's width (from the last resize), for the help's wrapped lines.
    pub viewport_width: u16,
    /// `w`: every column at its natural width (wide-only ones too), scrolled with ←/→.
    pub wide: bool,
    /// Columns scrolled off to the left in the wide mode.
    pub column_offset: usize,
    /// How each view's rows are sorted (`s` / `S` / `:sort`); unsorted views keep the model's order.
    pub sorts: HashMap<ViewKind, Sort>,
    /// Subscription dependencies per application, worked out when its detail
    /// pane opens rather than on every snapshot.
    pub dependencies: HashMap<crate::api::ObjectKey, Result<crate::deps::DependencyReport, String>>,
    /// The namespaces the API server listed for `:ns` (asked when `:ns ` is typed), or why not.
    pub namespaces: Option<Result<Vec<String>, String>>,
    /// The kubeconfig's contexts, for `:ctx`.
    pub contexts: Vec<String>,
    /// Whether the runtime reads the fleet (`--contexts`, or `:fleet` once opened).
    pub fleet_watched: bool,
    pub quit: bool,
    /// A write key pressed while access was still being checked.
    pub pending_write: Option<super::user_write::PendingWrite>,
    /// Keys typed in the same burst as the one that closed a dialog are not hotkeys: a reason
    /// typed on after Enter must not move, open or approve anything. Holds the time of the last
    /// swallowed key; the guard ends after a pause of `BURST_PAUSE`.
    pub burst_guard: Option<std::time::Instant>,
}

/// How a piece of the header is coloured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// A pause this long between two keys ends a burst.
pub const BURST_PAUSE: std::time::Duration = std::time::Duration::from_millis(400);

impl App {
    pub fn new(session: Session, theme: Theme, theme_names: Vec<String>, keymap: Keymap, now: Timestamp) -> Self {
        Self {
            snapshot: Arc::new(Snapshot::default()),
            route: Route { view: ViewKind::Applications, focus: None },
            back: Vec::new(),
            cursors: HashMap::new(),
            visible: Vec::new(),
            filter: String::new(),
            filter_error: None,
            input: Input::None,
            overlay: Overlay::None,
            session,
            role: Role::Starting,
            leader: None,
            write_failure: None,
            go_operator: None,
            connection: ConnectionState::default(),
            access: super::user_write::AccessMap::default(),
            lease_namespace: None,
            flash: None,
            theme,
            theme_names,
            keymap,
            now,
            burst_guard: None,
            viewport_rows: 20,
            viewport_height: 24,
            viewport_width: 80,
            wide: false,
            column_offset: 0,
            sorts: HashMap::new(),
            dependencies: HashMap::new(),
            namespaces: None,
            contexts: Vec::new(),
            fleet_watched: false,
            quit: false,
            pending_write: None,
        }
    }

    pub fn cursor(&self) -> Cursor {
        self.cursors.get(&self.route).cloned().unwrap_or_default()
    }

    /// Where a cluster Freeze counts: the namespace of the leading engine's Lease, else of this
    /// console's engine's.
    pub fn freeze_namespace(&self) -> Option<&str> {
        let leads = match &self.leader {
            Some(crate::leadership::LeaderView::Leads { lease, .. }) => {
                lease.split_once('/').map(|(namespace, _)| namespace)
            }
            _ => None,
        };
        leads.or(self.lease_namespace.as_deref())
    }

    /// The leading engine's `--change-windows`: `Some(None)` when it published its settings
    /// without any, `None` when no leader said (nobody leads, or an older engine).
    pub fn cluster_windows(&self) -> Option<Option<&str>> {
        self.leader.as_ref()?.settings().map(|settings| settings.change_windows.as_deref())
    }

    /// The engine role as the header shows it: Read-only wins.
    pub fn role_label(&self) -> &'static str {
        if self.session.readonly { "Read-only" } else { self.role.label() }
    }

    /// What the header says after the role: who leads when this console does not, and that
    /// nobody handles rotations when nobody does.
    pub fn leader_note(&self) -> Option<(String, super::app::Severity)> {
        if self.role == Role::Leader && self.write_failure.is_some() {
            return Some(("✗ writes failing (see messages)".to_string(), Severity::Error));
        }
        let warning = self.go_operator_warning();
        let leader = if self.role == Role::Leader { None } else { self.leader.as_ref().map(leader_text) };
        // An observer names the leader even while it warns about the Go CAP Operator.
        match (leader, warning) {
            // The warning first: on a narrow header it is what must not be cut.
            (Some((text, _)), Some(warning)) => Some((format!("{warning} {text}"), Severity::Warning)),
            (None, Some(warning)) => Some((warning, Severity::Warning)),
            (leader, None) => leader,
        }
    }

    /// A Go CAP Operator runs and applications in view set `spec.rolloutOnCredentialUpdate`: it
    /// restarts their Deployments too (docs/COMPATIBILITY.md).
    fn go_operator_warning(&self) -> Option<String> {
        self.go_operator.as_ref()?;
        let both = self.snapshot.apps.iter().filter(|a| a.opt_in == crate::readmodel::OptIn::Spec).count();
        (both > 0).then(|| format!("⚠ Go CAP Operator also rolls {both} app(s): capdeck doctor"))
    }
}

/// The header's words for who leads, when this console does not.
fn leader_text(leader: &crate::leadership::LeaderView) -> (String, Severity) {
    use crate::leadership::LeaderView;
    match leader {
        LeaderView::Leads { identity, lease, renewed_ago, .. } => {
            // The Lease's namespace is where it is; its name only when it is not the default
            // (the header is short of room).
            let place = lease.strip_suffix(&format!("/{}", crate::leadership::DEFAULT_LEASE_NAME)).unwrap_or(lease);
            (format!("(leader: {identity} in {place}, renewed {renewed_ago}s ago)"), Severity::Info)
        }
        LeaderView::Nobody { .. } => ("— no leader: rotations are not being handled".to_string(), Severity::Warning),
        // The help screen and `capdeck doctor` say why; the header stays short.
        LeaderView::CannotLook { .. } => {
            ("(leader unknown: you may not read capdeck's Leases)".to_string(), Severity::Warning)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_view_lists_first_a_kind_the_stores_track() {
        for view in ViewKind::ALL {
            if let Some(kind) = view.store_kind() {
                assert!(crate::cluster::stores::VIEW_KINDS.contains(&kind), "{view:?} names {kind}");
            }
        }
    }
}
