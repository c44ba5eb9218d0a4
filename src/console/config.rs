//! `$XDG_CONFIG_HOME/capdeck/config.toml`: theme, key overrides and defaults.
//!
//! ```toml
//! theme = "light"
//! readonly = true
//! [keys]
//! approve = "A"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleConfig {
    pub theme: Option<String>,
    #[serde(default)]
    pub readonly: bool,
    /// Action name → key (see the help screen for action names).
    #[serde(default)]
    pub keys: BTreeMap<String, String>,
}

/// `$XDG_CONFIG_HOME/capdeck` (or the platform's equivalent).
pub fn config_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("capdeck"));
    }
    directories::ProjectDirs::from("dev", "capdeck", "capdeck").map(|dirs| dirs.config_dir().to_path_buf())
}

/// Where the console writes its log files.
pub fn log_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("capdeck");
    }
    directories::ProjectDirs::from("dev", "capdeck", "capdeck")
        .map(|dirs| dirs.state_dir().unwrap_or_else(|| dirs.cache_dir()).to_path_buf())
        .unwrap_or_else(|| std::env::temp_dir().join("capdeck"))
}

impl ConsoleConfig {
    /// Read the config file; a missing file is the default, a broken one an error naming it.
    pub fn load(path: &Path) -> Result<Self, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|error| format!("{}: {}", path.display(), error.message())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(error) => Err(format!("{}: {error}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_is_default_and_bad_files_name_themselves() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(ConsoleConfig::load(&dir.path().join("none.toml")), Ok(ConsoleConfig::default()));
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "theme = \"light\"\nreadonly = true\n[keys]\napprove = \"A\"\n").expect("write");
        let config = ConsoleConfig::load(&path).expect("valid");
        assert_eq!(config.theme.as_deref(), Some("light"));
        assert!(config.readonly);
        assert_eq!(config.keys["approve"], "A");
        std::fs::write(&path, "theme = [1, 2\n").expect("write");
        assert!(ConsoleConfig::load(&path).expect_err("broken").starts_with(&path.display().to_string()));
        std::fs::write(&path, "colour = \"red\"\n").expect("write");
        assert!(ConsoleConfig::load(&path).expect_err("unknown").contains("unknown field"));
    }
}
