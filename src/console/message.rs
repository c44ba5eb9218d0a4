//! The console's typed messages: `Msg`, what happened (a key, a resize, new data, the answer to
//! a command), and `Command`, what `update` asks the runtime to do. Watch tasks, the engine and
//! command tasks send `Msg`s on one channel; `Runtime::execute` carries out each `Command`.

use std::sync::Arc;

use crossterm::event::KeyEvent;
use k8s_openapi::jiff::Timestamp;

use super::app::Route;
use super::theme::Theme;
use super::user_write::{UserWrite, WriteKind};
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
    /// Whether the user may make writes of `kind` in `namespace` (`Command::CheckAccess` asked).
    Access {
        kind: WriteKind,
        namespace: String,
        allowed: bool,
    },
    /// A user's write was carried out (what it did), or why not (`Command::Write` asked).
    WriteDone(Result<String, String>),
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
    /// Carry out a write the user confirmed, with who and why (`Msg::WriteDone` answers).
    Write(UserWrite),
    /// Ask whether the user may make writes of `kind` in `namespace` (`Msg::Access` answers).
    CheckAccess {
        kind: WriteKind,
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
