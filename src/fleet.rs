//! The fleet: what is open in every kube context at once — batches awaiting approval, held or
//! failed, credentials at risk, stalled rollouts, and who leads the engine there. Each context is
//! read on its own (concurrently, each with its own timeout) into rows; a context that cannot be
//! read is a row that says why, never a missing one. `capdeck fleet` prints the rows, the
//! console's `:fleet` view shows them.

mod read;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::leadership::NO_LEADER;

pub use read::{FleetOptions, binding_secrets, consumer_objects, read_fleet};

/// `--contexts`: every context of the kubeconfig, or the ones named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContextList {
    All,
    Named(Vec<String>),
}

impl std::str::FromStr for ContextList {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.trim() == "all" {
            return Ok(Self::All);
        }
        let names: Vec<String> =
            text.split(',').map(str::trim).filter(|name| !name.is_empty()).map(str::to_string).collect();
        if names.is_empty() {
            return Err("expected `all` or context names separated by commas (kubectl config get-contexts)".into());
        }
        Ok(Self::Named(names))
    }
}

impl ContextList {
    /// The context names to read, in the kubeconfig's order for `all`.
    pub fn resolve(&self, kubeconfig_contexts: Vec<String>) -> Vec<String> {
        match self {
            Self::All => kubeconfig_contexts,
            Self::Named(names) => names.clone(),
        }
    }
}

/// `--timeout`: a Go duration above zero (`0s` would give every context no time to answer).
pub fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    let timeout = crate::api::go_duration::parse_go_duration(text).map_err(|error| error.to_string())?;
    if timeout.is_zero() {
        return Err(format!(
            "{text:?} gives every context no time to answer: use a duration above zero, such as 5s or 1m"
        ));
    }
    Ok(timeout)
}

/// How a context answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RowState {
    /// Something is open in this namespace.
    Open,
    /// Read, and nothing is open anywhere in the context.
    Clear,
    /// The API server could not be reached (or did not answer in time).
    Unreachable,
    /// The API server refused these credentials or this user.
    Forbidden,
}

impl RowState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Clear => "clear",
            Self::Unreachable => "unreachable",
            Self::Forbidden => "forbidden",
        }
    }

    /// Whether the context could be read at all.
    pub fn is_read(self) -> bool {
        matches!(self, Self::Open | Self::Clear)
    }
}

/// A batch that waits for someone: awaiting approval, held, or failed (its application's newest).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenBatch {
    pub name: String,
    pub application: String,
    pub phase: String,
    /// The Ready condition's reason (`RolloutFailureGuard` for a batch the failure guard holds).
    pub reason: String,
    /// Its state in the words of every other surface (`Held · failure guard`).
    pub state: String,
    pub window_end: Timestamp,
    /// The earliest revocation of its Secrets' old credentials, when known.
    pub old_credentials_revocable: Option<Timestamp>,
}

/// A consumed binding Secret whose credentials are at risk or unsafe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialRisk {
    pub secret: String,
    pub verdict: String,
    /// The report's last reason (the one that decided the verdict).
    pub reason: String,
}

/// A freeze in force: nothing rolls in what it covers until it ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActiveFreeze {
    /// `cluster`, `namespace shop` or `CAPApplication shop/bookshop`.
    pub target: String,
    pub until: Timestamp,
    pub by: String,
    pub reason: Option<String>,
}

impl ActiveFreeze {
    pub fn of(freeze: &crate::api::Freeze) -> Self {
        Self {
            target: freeze.target(),
            until: freeze.ends(),
            by: freeze.spec.frozen.by.clone(),
            reason: freeze.spec.frozen.reason.clone().filter(|reason| !reason.is_empty()),
        }
    }
}

/// One row: a context and namespace with something open, a context with nothing open, or a
/// context that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetRow {
    pub context: String,
    /// `None`: the row is about the whole context (clear, or not read).
    pub namespace: Option<String>,
    pub state: RowState,
    /// Why a context could not be read, and what to do.
    pub why: Option<String>,
    pub batches: Vec<OpenBatch>,
    pub credentials: Vec<CredentialRisk>,
    /// Deployments that stalled or fail in a rolling batch: `batch/deployment`.
    pub stalled: Vec<String>,
    /// Deployments on old credentials that no open batch rolls (an undo, a cancel, a failure
    /// left them so): never a `clear` context.
    pub out_of_date: Vec<crate::plan::OutOfDate>,
    /// Who leads the engine in this context, or why that is not known.
    pub leader: String,
    /// What else to know about the context: objects left out, credentials not checked.
    pub notes: Vec<String>,
    /// The freezes in force over the row's namespace (its own, its applications', the cluster's)
    /// or, on a whole-context row, anywhere in the context; `None`: they could not be read.
    pub freezes: Option<Vec<ActiveFreeze>>,
    /// The leading engine's cluster change windows, as it published them (`None`: none set, or
    /// no leader says).
    pub change_windows: Option<String>,
}

impl FleetRow {
    pub fn problem(context: &str, state: RowState, why: String) -> Self {
        Self {
            context: context.to_string(),
            namespace: None,
            state,
            why: Some(why),
            batches: Vec::new(),
            credentials: Vec::new(),
            stalled: Vec::new(),
            out_of_date: Vec::new(),
            leader: "-".into(),
            notes: Vec::new(),
            freezes: None,
            change_windows: None,
        }
    }

    /// The FROZEN column: `no`, `cluster until 18:00Z` (one freeze, `namespace` or `app NAME` on
    /// its namespace's row; a date when it ends more than a day from `now`), `3 freezes`, or `?`
    /// when freezes could not be read.
    pub fn frozen_text(&self, now: Timestamp) -> String {
        match self.freezes.as_deref() {
            None => "?".into(),
            Some([]) => "no".into(),
            Some([freeze]) => {
                // On a namespace's row its name goes without saying.
                let mut target = freeze.target.replacen("CAPApplication ", "app ", 1);
                if let Some(namespace) = &self.namespace {
                    target = target.replacen(&format!(" {namespace}/"), " ", 1);
                    if target == format!("namespace {namespace}") {
                        target = "namespace".into();
                    }
                }
                let format =
                    if freeze.until.as_second() - now.as_second() < 24 * 3600 { "%H:%MZ" } else { "%Y-%m-%d %H:%MZ" };
                format!("{target} until {}", freeze.until.strftime(format))
            }
            Some(several) => format!("{} freezes", several.len()),
        }
    }

    /// The NEXT WINDOW column, from the leading engine's cluster change windows: `open` inside
    /// one, `in 3h12m` to the next opening, `-` when none are set, `?` when they do not parse.
    pub fn next_window_text(&self, now: Timestamp) -> String {
        let Some(text) = self.change_windows.as_deref() else { return "-".into() };
        match crate::api::change_window::ChangeWindows::parse(text).map(|windows| windows.state_at(now)) {
            Ok(crate::api::change_window::WindowState::Open { .. }) => "open".into(),
            Ok(crate::api::change_window::WindowState::Closed { opens }) => countdown(opens, now),
            Err(_) => "?".into(),
        }
    }

    fn count(&self, phase: &str) -> usize {
        self.batches.iter().filter(|batch| batch.phase == phase).count()
    }

    pub fn awaiting(&self) -> usize {
        self.count("AwaitingApproval")
    }

    pub fn held(&self) -> usize {
        self.count("Held")
    }

    pub fn failed(&self) -> usize {
        self.count("Failed")
    }

    /// The batch Enter should land on: the first that waits for approval, else the first listed.
    pub fn first_batch(&self) -> Option<&OpenBatch> {
        self.batches.iter().find(|batch| batch.phase == "AwaitingApproval").or_else(|| self.batches.first())
    }

    /// The soonest moment something here runs out: old credentials revocable, else a window end
    /// still ahead.
    pub fn deadline(&self) -> Option<Timestamp> {
        let revocable = self.batches.iter().filter_map(|batch| batch.old_credentials_revocable).min();
        revocable.or_else(|| self.batches.iter().map(|batch| batch.window_end).min())
    }

    /// The deadline labelled with what it is, from `now`: `old credentials revoked in 41m` (or
    /// `old credentials revocable since 5m ago`), else `window ends in 3m` / `window ended 6m55s
    /// ago` — a window end in the past is no missed deadline, so it must not read like one.
    pub fn deadline_text(&self, now: Timestamp) -> String {
        let revocable = self.batches.iter().filter_map(|batch| batch.old_credentials_revocable).min();
        if let Some(at) = revocable {
            return if at >= now {
                format!("old credentials revoked {}", countdown(at, now))
            } else {
                format!("old credentials revocable since {}", countdown(at, now))
            };
        }
        match self.batches.iter().map(|batch| batch.window_end).min() {
            Some(at) if at > now => format!("window ends {}", countdown(at, now)),
            Some(at) => format!("window ended {}", countdown(at, now)),
            None => "-".into(),
        }
    }

    /// [`Self::deadline_text`] for a narrow column: `creds in 41m`, `creds 5m ago`, `window in
    /// 3m`, `window 6m55s ago` (the console's fleet view; `d` has the long form).
    pub fn deadline_short(&self, now: Timestamp) -> String {
        self.deadline_text(now)
            .replacen("old credentials revoked ", "creds ", 1)
            .replacen("old credentials revocable since ", "creds ", 1)
            .replacen("window ends ", "window ", 1)
            .replacen("window ended ", "window ", 1)
    }

    /// `3 at-risk, 1 unsafe` or `-`.
    pub fn credentials_text(&self) -> String {
        let at_risk = self.credentials.iter().filter(|c| c.verdict == "at-risk").count();
        let unsafe_ = self.credentials.iter().filter(|c| c.verdict == "unsafe").count();
        match (at_risk, unsafe_) {
            (0, 0) => "-".into(),
            (a, 0) => format!("{a} at-risk"),
            (0, u) => format!("{u} unsafe"),
            (a, u) => format!("{a} at-risk, {u} unsafe"),
        }
    }

    /// `2 awaiting, 1 held` (what the batches wait for), `1 on old credentials` (Deployments no
    /// open batch rolls), or `-`.
    pub fn summary(&self) -> String {
        let counts = [
            (self.awaiting(), "awaiting"),
            (self.held(), "held"),
            (self.failed(), "failed"),
            (self.out_of_date.len(), "on old credentials"),
        ];
        let parts: Vec<String> =
            counts.into_iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect();
        if parts.is_empty() { "-".into() } else { parts.join(", ") }
    }

    /// Why the row is here, in a few words: why it could not be read, else its first batch,
    /// else its first credential at risk.
    pub fn why_text(&self) -> String {
        if let Some(why) = &self.why {
            return why.clone();
        }
        let why = match (self.first_batch(), self.out_of_date.first(), self.credentials.first()) {
            (Some(batch), _, _) => format!("{} {}", batch.name, batch.state),
            (None, Some(old), _) => old.describe(),
            (None, None, Some(credential)) => {
                format!("{} {}: {}", credential.secret, credential.verdict, credential.reason)
            }
            (None, None, None) => self.notes.first().cloned().unwrap_or_else(|| "-".into()),
        };
        // Open work that no engine handles is said first, in every width (LEADER is a wide column).
        if self.leader == NO_LEADER && self.state == RowState::Open {
            return format!("{NO_LEADER}: rotations are not being handled; {why}");
        }
        why
    }

    /// The row's namespace for display (`*`: the whole context).
    pub fn namespace_text(&self) -> &str {
        self.namespace.as_deref().unwrap_or("*")
    }
}

/// `in 3h12m` / `5m ago` for a deadline, from `now`.
pub fn countdown(at: Timestamp, now: Timestamp) -> String {
    let seconds = at.as_second() - now.as_second();
    if seconds >= 0 {
        format!("in {}", crate::output::human_duration(seconds))
    } else {
        format!("{} ago", crate::output::human_duration(-seconds))
    }
}

/// The rows as `capdeck fleet -o table` prints them.
pub fn table(rows: &[FleetRow], now: Timestamp, wide: bool, headers: bool) -> String {
    let mut table = crate::output::Table::with_wide(
        &["CONTEXT", "NAMESPACE", "STATE", "BATCHES", "DEADLINE", "CREDENTIALS", "FROZEN", "NEXT WINDOW", "WHY"],
        &["STALLED", "LEADER"],
    );
    for row in rows {
        let read = row.state.is_read();
        table.row(vec![
            row.context.clone(),
            row.namespace_text().to_string(),
            row.state.as_str().to_string(),
            if read { row.summary() } else { "-".into() },
            row.deadline_text(now),
            row.credentials_text(),
            if read { row.frozen_text(now) } else { "-".into() },
            if read { row.next_window_text(now) } else { "-".into() },
            row.why_text(),
            if row.stalled.is_empty() { "-".into() } else { row.stalled.len().to_string() },
            row.leader.clone(),
        ]);
    }
    table.render_with(wide, headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_parse_as_all_or_a_list() {
        assert_eq!("all".parse::<ContextList>(), Ok(ContextList::All));
        assert_eq!("a, b,,c".parse::<ContextList>(), Ok(ContextList::Named(vec!["a".into(), "b".into(), "c".into()])));
        assert!(" , ".parse::<ContextList>().is_err());
        assert_eq!(ContextList::All.resolve(vec!["x".into(), "y".into()]), vec!["x".to_string(), "y".to_string()]);
    }

    #[test]
    fn a_timeout_must_be_above_zero() {
        assert_eq!(parse_timeout("5s"), Ok(std::time::Duration::from_secs(5)));
        assert_eq!(parse_timeout("250ms"), Ok(std::time::Duration::from_millis(250)));
        for zero in ["0s", "0", "0m0s"] {
            assert!(parse_timeout(zero).is_err_and(|why| why.contains("above zero")), "{zero}");
        }
        assert!(parse_timeout("5").is_err(), "a unit is needed");
    }

    /// Open work no engine handles says so in every width, not only in `-o wide`'s LEADER.
    #[test]
    fn open_work_without_a_leader_says_so_first() {
        let mut row = FleetRow::problem("prod", RowState::Open, String::new());
        row.why = None;
        row.batches = vec![OpenBatch {
            name: "b1".into(),
            application: "app".into(),
            phase: "AwaitingApproval".into(),
            reason: "AwaitingApproval".into(),
            state: "AwaitingApproval".into(),
            window_end: Timestamp::UNIX_EPOCH,
            old_credentials_revocable: None,
        }];
        row.leader = NO_LEADER.into();
        assert_eq!(row.why_text(), "no leader: rotations are not being handled; b1 AwaitingApproval");
        let narrow = table(std::slice::from_ref(&row), Timestamp::UNIX_EPOCH, false, true);
        assert!(narrow.contains("no leader: rotations are not being handled"), "{narrow}");
        row.leader = "capdeck-7d9 (capdeck-system/capdeck-engine)".into();
        assert_eq!(row.why_text(), "b1 AwaitingApproval");
        row.state = RowState::Clear;
        row.leader = NO_LEADER.into();
        assert_eq!(row.why_text(), "b1 AwaitingApproval", "nothing open: nothing to handle");
    }

    #[test]
    fn a_row_counts_its_batches_and_names_the_soonest_deadline() {
        let at = |second: i64| Timestamp::from_second(second).expect("time");
        let batch = |name: &str, phase: &str, end: i64, revocable: Option<i64>| OpenBatch {
            name: name.into(),
            application: "app".into(),
            phase: phase.into(),
            reason: String::new(),
            state: phase.into(),
            window_end: at(end),
            old_credentials_revocable: revocable.map(at),
        };
        let mut row = FleetRow::problem("prod", RowState::Open, String::new());
        row.why = None;
        row.batches = vec![batch("b1", "Held", 100, None), batch("b2", "AwaitingApproval", 200, Some(5000))];
        assert_eq!(row.summary(), "1 awaiting, 1 held");
        assert_eq!(row.first_batch().map(|b| b.name.as_str()), Some("b2"));
        assert_eq!(row.deadline(), Some(at(5000)), "a revocation beats a window end");
        row.batches.truncate(1);
        assert_eq!(row.deadline(), Some(at(100)));
        assert_eq!(countdown(at(3640), at(40)), "in 60m");
        assert_eq!(countdown(at(40), at(3640)), "60m ago");
        assert_eq!(row.deadline_text(at(50)), "window ends in 50s");
        assert_eq!(row.deadline_text(at(515)), "window ended 6m55s ago", "what ended, not a missed deadline");
        assert_eq!(row.deadline_short(at(515)), "window 6m55s ago", "the console's narrow column");
        row.batches = vec![batch("b2", "AwaitingApproval", 200, Some(2660))];
        assert_eq!(row.deadline_text(at(200)), "old credentials revoked in 41m");
        assert_eq!(row.deadline_text(at(2960)), "old credentials revocable since 5m ago");
        assert_eq!(row.deadline_short(at(200)), "creds in 41m");
        row.freezes = Some(vec![ActiveFreeze {
            target: "CAPApplication shop/bookshop".into(),
            until: at(200 + 2 * 86400),
            by: "alice".into(),
            reason: None,
        }]);
        assert_eq!(row.frozen_text(at(200)), "app shop/bookshop until 1970-01-03 00:03Z", "a day away: the date");
        let mut in_shop = row.clone();
        in_shop.namespace = Some("shop".into());
        assert_eq!(in_shop.frozen_text(at(200)), "app bookshop until 1970-01-03 00:03Z", "its namespace goes unsaid");
        row.change_windows = Some("Mon-Sun 00:00-24:00 UTC".into());
        assert_eq!(row.next_window_text(at(200)), "open");
        row.change_windows = Some("Mon 25:00-26:00 UTC".into());
        assert_eq!(row.next_window_text(at(200)), "?");
        let text = table(std::slice::from_ref(&row), at(200), false, true);
        assert!(
            text.contains("FROZEN") && text.contains("NEXT WINDOW") && text.contains("app shop/bookshop"),
            "{text}"
        );
        let unreachable = FleetRow::problem("eu", RowState::Unreachable, "no answer within 5s".into());
        let text = table(&[unreachable], at(0), true, true);
        assert!(text.contains("unreachable") && text.contains("no answer within 5s"), "{text}");
    }
}
