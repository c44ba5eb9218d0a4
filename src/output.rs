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
