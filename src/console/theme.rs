//! Colour themes with semantic slots (`themes/*.toml`, embedded at build time; files in
//! `$XDG_CONFIG_HOME/capdeck/themes/` override or add themes).

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

use crate::api::rotation_batch::DeploymentRolloutState;
use crate::api::rotation_batch::state::{ApprovalNeed, BatchState, HeldBy, WaitCause};

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Theme {
    pub name: String,
    pub background: Color,
    pub foreground: Color,
    pub muted: Color,
    pub accent: Color,
    pub border: Color,
    pub header_background: Color,
    pub header_foreground: Color,
    pub selection_background: Color,
    pub selection_foreground: Color,
    pub ok: Color,
    pub warning: Color,
    pub error: Color,
    pub info: Color,
}

/// The shipped themes, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    ("high-contrast", include_str!("../../themes/high-contrast.toml")),
];

impl Default for Theme {
    fn default() -> Self {
        // The shipped dark theme parses (a test checks it); this fallback only guards a broken build.
        BUILTIN.first().and_then(|(_, text)| toml::from_str(text).ok()).unwrap_or(Self {
            name: "dark".into(),
            background: Color::Reset,
            foreground: Color::White,
            muted: Color::Gray,
            accent: Color::Cyan,
            border: Color::DarkGray,
            header_background: Color::DarkGray,
            header_foreground: Color::White,
            selection_background: Color::Blue,
            selection_foreground: Color::White,
            ok: Color::Green,
            warning: Color::Yellow,
            error: Color::Red,
            info: Color::Cyan,
        })
    }
}

impl Theme {
    pub fn parse(text: &str, origin: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|error| format!("theme {origin}: {}", error.message()))
    }

    /// A theme by name: a user file first, then the shipped ones.
    pub fn load(name: &str, user_dir: Option<&std::path::Path>) -> Result<Self, String> {
        if let Some(dir) = user_dir {
            let path = dir.join(format!("{name}.toml"));
            if let Ok(text) = std::fs::read_to_string(&path) {
                return Self::parse(&text, &path.display().to_string());
            }
        }
        match BUILTIN.iter().find(|(builtin, _)| *builtin == name) {
            Some((_, text)) => Self::parse(text, name),
            None => Err(format!("no theme {name:?} (shipped: {})", Self::names(user_dir).join(", "))),
        }
    }

    /// Shipped themes plus any in the user directory.
    pub fn names(user_dir: Option<&std::path::Path>) -> Vec<String> {
        let mut names: Vec<String> = BUILTIN.iter().map(|(name, _)| (*name).to_string()).collect();
        if let Some(Ok(entries)) = user_dir.map(std::fs::read_dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|ext| ext == "toml")
                    && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
                    && !names.iter().any(|n| n == stem)
                {
                    names.push(stem.to_string());
                }
            }
        }
        names
    }

    pub fn base(&self) -> Style {
        Style::default().fg(self.foreground).bg(self.background)
    }

    pub fn muted(&self) -> Style {
        Style::default().fg(self.muted)
    }

    pub fn accent(&self) -> Style {
        Style::default().fg(self.accent).add_modifier(Modifier::BOLD)
    }

    pub fn border(&self) -> Style {
        Style::default().fg(self.border)
    }

    pub fn header(&self) -> Style {
        Style::default().fg(self.header_foreground).bg(self.header_background)
    }

    pub fn selection(&self) -> Style {
        Style::default().fg(self.selection_foreground).bg(self.selection_background).add_modifier(Modifier::BOLD)
    }

    pub fn ok(&self) -> Style {
        Style::default().fg(self.ok)
    }

    pub fn warning(&self) -> Style {
        Style::default().fg(self.warning)
    }

    pub fn error(&self) -> Style {
        Style::default().fg(self.error).add_modifier(Modifier::BOLD)
    }

    pub fn info(&self) -> Style {
        Style::default().fg(self.info)
    }
}

/// The style of a state word of the CAP objects, Pods, Events and credential verdicts: green when
/// fine, yellow while under way, red when broken. A batch's state and a Deployment's rollout state
/// have typed styles of their own (`batch_state_style`, `rollout_state_style`).
pub fn state_style(theme: &Theme, state: &str) -> Style {
    match state {
        "Ready" | "Provisioned" | "Completed" | "Normal" => theme.ok(),
        "Error" | "Failed" | "ProvisioningError" | "UpgradeError" | "DeletionError" | "Warning" => theme.error(),
        "Processing" | "Provisioning" | "Upgrading" | "Rolling" | "Deleting" => theme.warning(),
        "-" | "unknown" => theme.muted(),
        // Credential verdicts (the Credentials view).
        "ok" => theme.ok(),
        "at-risk" => theme.warning(),
        "unsafe" => theme.error(),
        _ => theme.base(),
    }
}

/// A batch state's colour, matched on the typed state so that a new state does not compile
/// without one: green when done, yellow while under way or waiting on a person, cyan while waiting
/// for a time, red (reversed: the row asks for a person now) when broken, muted when ended
/// without effect.
pub fn batch_state_style(theme: &Theme, state: &BatchState) -> Style {
    match state {
        BatchState::Succeeded | BatchState::NoChange => theme.ok(),
        BatchState::Failed { .. } => theme.error(),
        BatchState::Held { by: HeldBy::FailureGuard | HeldBy::UnreadableWindows } => {
            theme.error().add_modifier(Modifier::REVERSED)
        }
        BatchState::AwaitingApproval { why: ApprovalNeed::Policy | ApprovalNeed::StormGuard } => theme.warning(),
        // Waiting would outlive the old credentials: a person must act now.
        BatchState::AwaitingApproval {
            why: ApprovalNeed::CredentialsExpiring | ApprovalNeed::WindowTooLate | ApprovalNeed::FreezeTooLong,
        } => theme.warning().add_modifier(Modifier::BOLD | Modifier::REVERSED),
        BatchState::Held { by: HeldBy::Person | HeldBy::Unsaid }
        | BatchState::Collecting { .. }
        | BatchState::RollingOut
        | BatchState::Cancelling
        | BatchState::Undoing
        | BatchState::Undone => theme.warning(),
        BatchState::Waiting {
            why: WaitCause::OutsideWindow | WaitCause::WindowClosed | WaitCause::Frozen | WaitCause::Unsaid,
            ..
        } => theme.info(),
        BatchState::Cancelled | BatchState::Superseded | BatchState::Unknown { .. } => theme.muted(),
    }
}

/// A Deployment's rollout state: its cell's colour, and whether its whole row is highlighted
/// (its new Pods fail or it stopped: the batch's failure guard acts on it).
pub fn rollout_state_style(theme: &Theme, state: Option<&DeploymentRolloutState>) -> (Style, bool) {
    match state {
        Some(DeploymentRolloutState::Complete) => (theme.ok(), false),
        Some(DeploymentRolloutState::Failing | DeploymentRolloutState::Failed) => (theme.error(), true),
        Some(DeploymentRolloutState::Stalled) => (theme.error().add_modifier(Modifier::REVERSED), true),
        Some(DeploymentRolloutState::Queued | DeploymentRolloutState::Rolling | DeploymentRolloutState::Undone) => {
            (theme.warning(), false)
        }
        Some(DeploymentRolloutState::Other(_)) | None => (theme.muted(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every state a batch or one of its Deployments can be in has a colour (a `Failing`
    /// Deployment was drawn plain), and so has every state of the CAP objects a view shows.
    #[test]
    fn every_batch_and_rollout_state_has_a_colour() {
        let theme = Theme::load("dark", None).expect("dark");
        let plain: Vec<String> = BatchState::every()
            .iter()
            .filter(|state| batch_state_style(&theme, state) == theme.base())
            .map(BatchState::label)
            .collect();
        assert!(plain.is_empty(), "batch states drawn without a colour: {plain:?}");
        let rollouts = DeploymentRolloutState::KNOWN.iter().map(|state| DeploymentRolloutState::from(*state));
        let plain: Vec<DeploymentRolloutState> =
            rollouts.filter(|state| rollout_state_style(&theme, Some(state)).0 == theme.base()).collect();
        assert!(plain.is_empty(), "rollout states drawn without a colour: {plain:?}");
        assert_eq!(rollout_state_style(&theme, Some(&DeploymentRolloutState::Failing)), (theme.error(), true));
        use crate::api::cap::{CAPTenantOperationState, CAPTenantState};
        let words = CAPTenantState::KNOWN.iter().chain(CAPTenantOperationState::KNOWN).filter(|word| !word.is_empty());
        let plain: Vec<&&str> = words.filter(|word| state_style(&theme, word) == theme.base()).collect();
        assert!(plain.is_empty(), "CAP states drawn without a colour: {plain:?}");
    }

    #[test]
    fn every_shipped_theme_parses() {
        for (name, text) in BUILTIN {
            let theme = Theme::parse(text, name).expect("parses");
            assert_eq!(&theme.name, name);
        }
    }

    #[test]
    fn bad_theme_files_fail_with_a_readable_message() {
        let missing = Theme::parse("name = \"x\"\n", "x.toml").expect_err("missing slots");
        assert!(missing.starts_with("theme x.toml: ") && missing.contains("missing field `background`"), "{missing}");
        let unknown =
            Theme::parse(&format!("{}\nsparkle = \"red\"\n", BUILTIN[0].1), "y.toml").expect_err("unknown slot");
        assert!(unknown.contains("unknown field `sparkle`"), "{unknown}");
        let colour = Theme::parse(&BUILTIN[0].1.replace("#d8dee9", "not-a-colour"), "z.toml").expect_err("bad colour");
        assert!(colour.contains("theme z.toml"), "{colour}");
        assert!(Theme::load("neon", None).expect_err("unknown").contains("shipped: dark, light, high-contrast"));
    }

    #[test]
    fn user_themes_override_and_add() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("light.toml"), BUILTIN[1].1.replace("#1d4ed8", "#ff0000")).expect("write");
        std::fs::write(dir.path().join("mine.toml"), BUILTIN[0].1.replace("name = \"dark\"", "name = \"mine\""))
            .expect("write");
        assert_eq!(Theme::load("light", Some(dir.path())).expect("user light").accent, Color::Rgb(255, 0, 0));
        assert_eq!(Theme::load("mine", Some(dir.path())).expect("user theme").name, "mine");
        assert!(Theme::names(Some(dir.path())).contains(&"mine".to_string()));
    }
}
