//! The console's typed messages: `Msg`, what happened (a key, a resize, new data, the answer to
//! a command), and `Command`, what `update` asks the runtime to do. Watch tasks, the engine and
//! command tasks send `Msg`s on one channel; `Runtime::execute` carries out each `Command`.

use std::sync::Arc;

use crossterm::event::KeyEvent;
use k8s_openapi::jiff::Timestamp;

use super::app::Route;
use super::theme::Theme;
use crate::actions::{ActionReport, BatchAction};
use crate::cluster::stores::ConnectionState;
use crate::engine::Role;
use crate::readmodel::Snapshot;

pub enum Msg {
    Key(KeyEvent),
    Resize {
        width: u16,
        height: u16,
    },
    Tick(Timestamp),
    Snapshot(Arc<Snapshot>),
    Connection(ConnectionState),
    Role(Role),
    /// Who holds the engine's Lease now.
    Leader(crate::leadership::LeaderView),
    /// The attached engine's last failed write (None once a write succeeded again).
    WriteFailure(Option<String>),
    /// The Lease of a running Go CAP Operator, or None.
    GoOperator(Option<String>),
    Identity(String),
    Access {
        namespace: String,
        allowed: bool,
    },
    /// Whether the user may create and update Freezes in `namespace`.
    FreezeAccess {
        namespace: String,
        allowed: bool,
    },
    ActionDone(Result<ActionReport, String>),
    /// A freeze or unfreeze was written (what it did), or why not.
    FreezeDone(Result<String, String>),
    Theme(Result<Theme, String>),
    /// The runtime moved to another context or namespace scope: forget what belonged to the old one.
    Switched {
        context: String,
        scope: String,
    },
    /// The namespaces that exist, or why they cannot be listed.
    Namespaces(Result<Vec<String>, String>),
    /// The kubeconfig's contexts.
    Contexts(Vec<String>),
    /// An application's subscription dependencies, worked out for its detail pane.
    Dependencies {
        namespace: String,
        name: String,
        report: Result<crate::deps::DependencyReport, String>,
    },
    /// A Deployment's ReplicaSets and Pods, for the Pods pane.
    Pods {
        namespace: String,
        deployment: String,
        rows: Result<Vec<crate::readmodel::pods::PodRow>, String>,
    },
    /// A Pod's last log lines, or why they cannot be read.
    PodLog {
        namespace: String,
        pod: String,
        lines: Result<Vec<String>, String>,
    },
    /// The fleet's rows: every context read (`Command::WatchFleet` started the reading).
    Fleet(Vec<crate::fleet::FleetRow>),
    /// Go to a view once a context switch asked for by Enter in the fleet view has happened.
    Open(Route),
    Error(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Read every context of the fleet now and every 30s from then on (`Msg::Fleet` answers).
    WatchFleet,
    /// Enter on a fleet row: switch to the context (and namespace), then open `route` there.
    OpenContext {
        context: String,
        namespace: Option<String>,
        route: Route,
    },
    Act {
        namespace: String,
        batch: String,
        action: BatchAction,
        reason: Option<String>,
    },
    CheckAccess {
        namespace: String,
    },
    /// Freeze the application until `until`, with who and why (`Z`; `Msg::FreezeDone` answers).
    Freeze {
        namespace: String,
        application: String,
        until: Timestamp,
        reason: String,
    },
    /// Lift the application's freeze, with who and why (`U`; `Msg::FreezeDone` answers).
    Unfreeze {
        namespace: String,
        application: String,
        reason: String,
    },
    /// Ask whether the user may freeze in `namespace` (`Msg::FreezeAccess` answers).
    CheckFreezeAccess {
        namespace: String,
    },
    LoadTheme(String),
    SwitchNamespace(Option<String>),
    SwitchContext(String),
    /// List the namespaces for the `:ns` picker (`Msg::Namespaces` answers).
    ListNamespaces,
    /// Work a detail pane needs (`Msg::Dependencies` answers).
    Detail(super::views::DetailNeed),
    /// Read a Deployment's ReplicaSets and Pods (`Msg::Pods` answers).
    Pods {
        namespace: String,
        deployment: String,
    },
    /// Read a Pod's last log lines, `get pods/log` checked first (`Msg::PodLog` answers).
    PodLog {
        namespace: String,
        pod: String,
        container: Option<String>,
    },
    Quit,
}
