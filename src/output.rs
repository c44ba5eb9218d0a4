//! Printing data for people (aligned tables) and for scripts (JSON).

use std::fmt::Write as _;

/// `-o json|table` of every subcommand that prints data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Aligned columns for people.
    #[default]
    Table,
    /// One JSON document for scripts.
    Json,
}

/// A plain text table: a header row and left-aligned columns separated by three spaces,
/// like `kubectl get`.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Self { header: header.iter().map(|cell| (*cell).to_string()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|cell| cell.chars().count()).collect();
        for row in &self.rows {
            for (index, cell) in row.iter().enumerate().take(columns) {
                widths[index] = widths[index].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (index, cell) in row.iter().enumerate().take(columns) {
                if index + 1 == columns {
                    line.push_str(cell);
                } else {
                    let _ = write!(line, "{cell:<width$}   ", width = widths[index]);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `1 Deployment`, `3 Deployments`.
pub fn count(n: usize, singular: &str) -> String {
    if n == 1 { format!("1 {singular}") } else { format!("{n} {singular}s") }
}

/// Pretty JSON with a trailing newline.
pub fn json(value: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into());
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_to_the_widest_cell() {
        let mut table = Table::new(&["NAME", "STATE"]);
        table.row(vec!["a".into(), "Ready".into()]);
        table.row(vec!["longer-name".into(), String::new()]);
        assert_eq!(table.render(), "NAME          STATE\na             Ready\nlonger-name\n");
    }
}

/// kubectl's age format (`k8s.io/apimachinery/pkg/util/duration.HumanDuration`): `45s`, `5m30s`,
/// `3h`, `2d4h`, `1y30d`.
/// A batch window as people say it: "ends in 4m", "ended 2m ago".
pub fn window_text(window_end: k8s_openapi::jiff::Timestamp, now: k8s_openapi::jiff::Timestamp) -> String {
    let seconds = window_end.as_second() - now.as_second();
    if seconds > 0 {
        format!("ends in {}", human_duration(seconds))
    } else {
        format!("ended {} ago", human_duration(-seconds))
    }
}

pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let seconds = seconds.max(0);
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let rest = seconds % 60;
        return if rest == 0 { format!("{minutes}m") } else { format!("{minutes}m{rest}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let rest = minutes % 60;
        return if rest == 0 { format!("{hours}h") } else { format!("{hours}h{rest}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let rest = hours % 24;
        return if rest == 0 { format!("{}d", hours / 24) } else { format!("{}d{rest}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{days}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod duration_tests {
    use super::human_duration;

    #[test]
    fn matches_kubectl_ages() {
        let cases = [
            (-5, "<invalid>"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (330, "5m30s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (30 * 3600, "30h"),
            (2 * 86400 + 4 * 3600, "2d4h"),
            (100 * 86400, "100d"),
            (3 * 365 * 86400 + 30 * 86400, "3y30d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(human_duration(seconds), expected, "{seconds}");
        }
    }
}
