//! Every sentence the console shows, in one place.

use super::keymap::Action;
use crate::actions::BatchAction;
use crate::api::BatchPhase;

pub const RECONNECTED: &str = "API server reachable again; views are live";
pub const NO_YAML: &str = "this row has no object to show as YAML";
pub const READONLY: &str =
    "read-only session (--readonly or readonly = true in config.toml); restart without it to write";
pub const SELECT_A_BATCH: &str = "select a batch first (:batches, or an application with an open batch)";
pub const CHECKING_ACCESS: &str =
    "checking whether you may change rotation batches here (the dialog opens when the API server answers)";
pub const REASON_PLACEHOLDER: &str = "why (recorded in the batch and its Events)";
pub const ENGINE_WRITE_FAILED: &str = "the engine's write failed (it retries)";
pub const REASON_REQUIRED: &str = "a reason is required: type why, then Enter (Esc cancels)";
pub const SELECT_AN_APPLICATION: &str = "select an application first (:apps, or a batch in :batches)";
pub const CHECKING_FREEZE_ACCESS: &str =
    "checking whether you may freeze applications here (the dialog opens when the API server answers)";
pub const FREEZE_HINT: &str = "Enter confirm · Tab next field · Esc cancel";
pub const FREEZE_FOR: &str = "Freeze for:";
/// How long a freeze from the console lasts unless changed in its dialog.
pub const FREEZE_DEFAULT: &str = "4h";
pub const FREEZE_REASON_PLACEHOLDER: &str = "why (recorded in the Freeze)";

/// `restarts: a, b, c and 4 more` for the dialog's preview; `none` when empty.
/// The label of a batch's deadline: when the old credentials of its Secrets may be revoked.
pub const OLD_CREDENTIALS: &str = "old credentials";

pub fn preview_line(label: &str, names: &[String]) -> String {
    const SHOWN: usize = 6;
    if names.is_empty() {
        return format!("{label}: none yet (decided when the window ends)");
    }
    let mut text = names.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    format!("{label} ({}): {text}", names.len())
}
/// A batch's Deployments whose version does not own them.
pub const NOT_OWNED: &str = "left alone, not owned by their version";
pub const NO_IDENTITY: &str =
    "the API server has not said who you are yet (SelfSubjectReview); approvals record a user, so try again shortly";
pub const SYNCING: &str = "syncing with the API server…";
pub const NOTHING_HERE: &str = "nothing here";
/// The fleet view before its first read.
pub const FLEET_READING: &str = "reading every kube context (each within 5s)…";
pub const NOTHING_MATCHES: &str = "no row matches the filter (Esc clears it)";
pub const CONNECTION_LOST: &str = "API server unreachable";
/// How `cluster::describe_error` begins an unreachable server's text (the banner says it already).
pub const CANNOT_REACH_PREFIX: &str = "cannot reach the API server: ";

/// What the views miss while these kinds (the stores' names) may not be listed (the API server
/// answered 403), with the `kubectl auth can-i` that checks the first.
pub fn forbidden_kinds(kinds: &[&str]) -> String {
    // (what people call it, what the views miss, its resource for kubectl)
    let words = |kind: &str| -> (String, &'static str, String) {
        match kind {
            "BindingSecret" => ("binding Secrets".into(), "credential verdicts and keys", "secrets".into()),
            "VcapSecret" => ("VCAP Secrets".into(), "what each Deployment runs", "secrets".into()),
            "Deployment" => ("Deployments".into(), "rollout progress", "deployments".into()),
            "RotationBatch" => ("RotationBatches".into(), "batches and rollouts", "rotationbatches.capdeck.dev".into()),
            "ServiceBinding" => {
                ("ServiceBindings".into(), "when old credentials die", "servicebindings.services.cloud.sap.com".into())
            }
            "Freeze" => ("Freezes".into(), "freezes", "freezes.capdeck.dev".into()),
            "Namespace" => ("Namespaces".into(), "namespace change windows", "namespaces".into()),
            "Event" => ("Events".into(), "events", "events".into()),
            other if other.starts_with("CAP") => {
                (format!("{other}s"), "its objects", format!("{}s.sme.sap.com", other.to_lowercase()))
            }
            other => (format!("{other}s"), "its objects", format!("{}s", other.to_lowercase())),
        }
    };
    let said: Vec<(String, &str, String)> = kinds.iter().map(|kind| words(kind)).collect();
    let names: Vec<&str> = said.iter().map(|(name, _, _)| name.as_str()).collect();
    let mut missing: Vec<&str> = said.iter().map(|(_, hides, _)| *hides).collect();
    missing.dedup();
    let resource = said.first().map(|(_, _, resource)| resource.as_str()).unwrap_or("secrets");
    format!(
        "you may not list {} here, so the views miss {} — kubectl auth can-i list {resource}",
        names.join(", "),
        missing.join(", ")
    )
}
pub const RECONNECTING: &str = "reconnecting by itself; views show the last known state";
pub const POPUP_HINT: &str = "Esc close · j/k scroll";
pub const DIALOG_HINT: &str = "Enter confirm · Esc cancel";
pub const DIALOG_TOGGLE_HINT: &str = "Tab toggle approve";
pub const FILTER_PROMPT: &str = "/";
pub const FILTER_HINT: &str = "Enter keep · Esc clear";
pub const NAMESPACES_FROM_VIEW: &str = "the namespaces of the objects in view; the API server would not list them";
pub const NAMESPACES_LOADING: &str = "asking the API server for the namespaces…";
pub const COMMAND_PROMPT: &str = ":";

/// The `:` line's hint: what Tab completes it to.
pub fn tab_hint(completion: &str) -> String {
    format!("Tab → {completion}")
}
pub const PODS_LOADING: &str = "reading the Deployment's ReplicaSets and Pods…";
pub const NO_PODS: &str = "no ReplicaSet or Pod of this Deployment (its selector matches none)";
pub const PODS_KEYS: &str = "j/k select · l the Pod's log · Esc back (read again every 5 s)";
pub const LOG_LOADING: &str = "checking get pods/log, then reading the log…";
pub const LOG_EMPTY: &str = "the container wrote nothing (yet)";
pub const LOGS_WHERE: &str = "l shows a Pod's log in the Pods pane: Enter on a rollout row (:rollouts) opens it";
pub const SELECT_A_POD: &str = "select a Pod (not a ReplicaSet) to read its log";
pub const INVALID_OBJECTS: &str = "objects that do not decode (see d on a row or the log)";

/// The title line in the wide mode (`w`): how many columns ←/→ would show.
pub fn wide_note(left: usize, right: usize) -> String {
    let plural = |n: usize| if n == 1 { "column" } else { "columns" };
    match (left, right) {
        (0, 0) => "wide: every column".to_string(),
        (0, right) => format!("wide: {right} more {} →", plural(right)),
        (left, 0) => format!("wide: ← {left} more {}", plural(left)),
        (left, right) => format!("wide: ← {left} more · {right} more {} →", plural(right)),
    }
}

/// The label of an action in hints and help.
pub fn action_label(action: Action) -> &'static str {
    match action {
        Action::Up => "up",
        Action::Down => "down",
        Action::Top => "top",
        Action::Bottom => "bottom",
        Action::PageUp => "page up",
        Action::PageDown => "page down",
        Action::Enter => "open",
        Action::Back => "back",
        Action::NextView => "next view",
        Action::PreviousView => "previous view",
        Action::Filter => "filter",
        Action::Command => "command",
        Action::Help => "help",
        Action::Detail => "detail",
        Action::Yaml => "yaml",
        Action::Wide => "wide",
        Action::ScrollLeft => "scroll left",
        Action::ScrollRight => "scroll right",
        Action::Sort => "sort",
        Action::SortReverse => "reverse sort",
        Action::Approve => "approve",
        Action::Force => "force",
        Action::Hold => "hold/release",
        Action::Cancel => "cancel",
        Action::Retry => "retry",
        Action::Undo => "undo",
        Action::Freeze => "freeze",
        Action::Unfreeze => "unfreeze",
        Action::Logs => "logs",
        Action::Quit => "quit",
    }
}

/// A longer sentence for the help screen.
pub fn action_help(action: Action) -> &'static str {
    match action {
        Action::Up => "select the row above",
        Action::Down => "select the row below",
        Action::Top => "first row",
        Action::Bottom => "last row",
        Action::PageUp => "one screen up",
        Action::PageDown => "one screen down",
        Action::Enter => "drill down: app → versions → tenants → operations; batch → rollouts → Pods",
        Action::Back => "clear the filter, close a pane, or go back",
        Action::NextView => "next view",
        Action::PreviousView => "previous view",
        Action::Filter => "filter the rows (Enter keeps it, Esc clears it)",
        Action::Command => "command line (Tab completes)",
        Action::Help => "this help",
        Action::Detail => "detail: conditions and related objects",
        Action::Yaml => "the object as YAML (Secret values and env values masked)",
        Action::Wide => "wide: every column at full width (scroll with ←/→); again to fit the terminal",
        Action::ScrollLeft => "wide mode: show the columns to the left",
        Action::ScrollRight => "wide mode: show the columns to the right",
        Action::Sort => "sort by the next column (the sorted one is marked ▲/▼; after the last, unsorted)",
        Action::SortReverse => "reverse the sort order",
        Action::Approve => "approve the selected batch (asks for a reason)",
        Action::Force => "end the selected batch's window now",
        Action::Hold => "hold the selected batch, or release it when held",
        Action::Cancel => "cancel the selected batch",
        Action::Retry => "retry a Failed or halted batch, or roll an Undone or Cancelled one forward",
        Action::Undo => "undo a Failed or halted batch: back to the previous VCAP Secrets",
        Action::Freeze => {
            "freeze the selected row's application: none of its batches starts rolling until the freeze ends (asks \
             for how long and why)"
        }
        Action::Unfreeze => {
            "lift the freeze of the selected row's application (asks why; the freeze stays as a record)"
        }
        Action::Logs => "in the Pods pane (Enter on a rollout): the selected Pod's last log lines",
        Action::Quit => "quit",
    }
}

/// `approving`, `forcing`, … for the footer while the write is in flight.
pub fn verb_progress(action: BatchAction) -> &'static str {
    match action {
        BatchAction::Approve => "approving",
        BatchAction::Force { approve: true } => "forcing and approving",
        BatchAction::Force { approve: false } => "forcing",
        BatchAction::Hold => "holding",
        BatchAction::Release => "releasing",
        BatchAction::Cancel => "cancelling",
        BatchAction::Retry => "retrying",
        BatchAction::Undo => "undoing",
    }
}

/// The dialog's title and what the action will do to a batch in `phase`.
pub fn dialog_text(action: BatchAction, phase: &BatchPhase) -> (&'static str, &'static str) {
    match action {
        BatchAction::Approve if *phase == BatchPhase::AwaitingApproval => {
            ("Approve batch", "The engine starts rolling the batch out at once.")
        }
        BatchAction::Approve if *phase == BatchPhase::Waiting => (
            "Approve batch",
            "The batch still waits for its change window (or the freeze's end), then rolls without asking again.",
        ),
        BatchAction::Force { .. } if *phase == BatchPhase::Waiting => (
            "Force batch",
            "Overrides the change windows and freezes: the rollout starts on the next pass, and the batch's record \
             says what it overrode.",
        ),
        BatchAction::Approve => {
            ("Approve batch", "Pre-approval: the batch rolls out when its window ends, without waiting.")
        }
        BatchAction::Force { .. } => {
            ("Force batch", "The batch's window ends now; the rollout starts on the next pass.")
        }
        BatchAction::Hold => {
            ("Hold batch", "Nothing new starts until the batch is released; rollouts under way finish.")
        }
        BatchAction::Release => ("Release batch", "The batch continues where it was held."),
        BatchAction::Cancel => (
            "Cancel batch",
            "Nothing more is rolled; Deployments already rolling finish. A later rotation opens a new batch.",
        ),
        BatchAction::Retry if matches!(phase, BatchPhase::Undone | BatchPhase::Cancelled) => (
            "Roll forward",
            "A new batch opens at once for what this batch left on the old credentials; the application's approval \
             policy, change windows and freezes apply to it.",
        ),
        BatchAction::Retry => (
            "Retry batch",
            "The stalled, failing and failed Deployments restart once more; queued ones start. The batch rolls on.",
        ),
        BatchAction::Undo => (
            "Undo batch",
            "Deployments the batch rolled and did not complete go back to their previous VCAP Secrets (the old \
             credentials); the batch ends Undone.",
        ),
    }
}

/// A batch's detail: no change windows at any level.
pub const NO_WINDOWS: &str = "none: any hour";
/// A batch's detail: none on the application or its Namespace, and no leader said its own.
pub const WINDOWS_CLUSTER_UNKNOWN: &str =
    "none on the application or its Namespace; the engine's --change-windows unknown (no leader said)";
/// A batch's detail: windows that cover every hour of the week.
pub const ALWAYS_OPEN: &str = "always open (every hour of the week)";

/// RBAC said no to freezing in `namespace`.
pub fn freeze_denied(user: &str, namespace: &str) -> String {
    format!("{user} may not create and update freezes (capdeck.dev) in namespace {namespace}")
}

/// `U` on an application that its own freeze does not hold.
pub fn not_frozen(namespace: &str, application: &str, other: Option<&str>) -> String {
    match other {
        Some(summary) => format!(
            "CAPApplication {namespace}/{application} has no freeze of its own to lift; it is held by: {summary} \
             (capdeck unfreeze lifts that one)"
        ),
        None => format!("CAPApplication {namespace}/{application} is not frozen"),
    }
}

/// The freeze dialog's title, and what confirming does.
pub fn freeze_dialog_text(unfreeze: bool) -> (&'static str, &'static str) {
    if unfreeze {
        (
            "Unfreeze application",
            "Its batches may roll again (in their change windows). The Freeze stays as a record of who lifted it and why.",
        )
    } else {
        (
            "Freeze application",
            "No batch of it starts rolling until the freeze ends; rotations are still collected. It replaces a \
             freeze of it in force.",
        )
    }
}

/// What the `until` field of a freeze must hold.
pub fn freeze_duration_error(text: &str) -> String {
    format!("{text:?} is not a duration: write how long, such as 4h, 90m or 48h")
}

/// `freezing cap-shop/bookshop…` for the footer while the write is in flight.
pub fn freeze_progress(unfreeze: bool, namespace: &str, application: &str) -> String {
    format!("{} {namespace}/{application}…", if unfreeze { "unfreezing" } else { "freezing" })
}

/// The header's banner while a freeze holds what is in view: the most relevant freeze (its
/// `Freeze::summary`) and, after it, how many more there are.
pub fn freeze_banner(summary: &str, more: usize) -> (String, String) {
    let more = if more > 0 { format!(" (+{more} more)") } else { String::new() };
    (format!(" ❄ {summary}"), more)
}

/// `:` commands for the help screen.
pub const COMMANDS_HELP: &[(&str, &str)] = &[
    (":apps :versions :tenants :ops", "CAP views (also :ca :cav :cat :ctop)"),
    (":batches :rollouts :events", "rotation batches, per-Deployment rollouts, Events (also :rb :ev)"),
    (":credentials", "when each Secret's old credentials die, and a verdict (:creds)"),
    (":fleet", "every kube context: what waits where, who leads (Enter opens that context on its batch)"),
    (":ns NAME | :ns all", "switch the namespace scope (Tab completes and lists the namespaces)"),
    (":ctx NAME", "switch the kubeconfig context (Tab completes and lists the contexts)"),
    (":sort COLUMN | :sort -COLUMN", "sort by a column (- descending); :sort alone: unsorted"),
    (":theme NAME", "switch the colour theme"),
    (":help  :q", "help, quit"),
];

/// The Credentials view's title note: which settings judged the margins.
pub fn margins_note(timing: crate::credentials::Timing, the_leaders: bool) -> String {
    format!(
        "margins: {}{}",
        timing.text(),
        if the_leaders { " (the leading engine's)" } else { " (this console's engine)" }
    )
}

/// The console's one relative-time format: kubectl's age (`45s`, `5m30s`, `3h`, `2d4h`), except
/// that a minute or more is never written in seconds (`1m53s`, not `113s`), so two cells side by
/// side read alike.
pub fn relative(seconds: i64) -> String {
    match seconds {
        60..=119 if seconds % 60 == 0 => "1m".into(),
        60..=119 => format!("1m{}s", seconds - 60),
        _ => crate::output::human_duration(seconds),
    }
}
