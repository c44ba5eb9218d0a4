//! Go durations (`10m`, `1h30m`, `72h`): capdeck's flags, and the duration fields of upstream
//! objects (a ServiceBinding's rotation policy). Printed back in a form Go parses.

use std::time::Duration;

/// `1h`, `2m30s`, `45s`.
pub fn humanize(duration: Duration) -> String {
    let seconds = duration.as_secs();
    let (hours, minutes, rest) = (seconds / 3600, (seconds % 3600) / 60, seconds % 60);
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    if rest > 0 || out.is_empty() {
        out.push_str(&format!("{rest}s"));
    }
    out
}

/// A flag value that is not a Go duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GoDurationError {
    #[error("an empty duration; use e.g. 10m or 1h30m")]
    Empty,
    #[error("{text:?} is not a duration like 10m or 1h30m: {reason}")]
    Invalid { text: String, reason: String },
    #[error("{text:?} must not be negative")]
    Negative { text: String },
}

/// Parse a Go duration for flags (`10m`, `1h30m`).
pub fn parse_go_duration(text: &str) -> Result<Duration, GoDurationError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(GoDurationError::Empty);
    }
    let parsed: kube::core::Duration = trimmed.parse().map_err(|error: kube::core::duration::ParseError| {
        GoDurationError::Invalid { text: text.into(), reason: error.to_string() }
    })?;
    if parsed.is_negative() {
        return Err(GoDurationError::Negative { text: text.into() });
    }
    Ok(Duration::from(parsed))
}
