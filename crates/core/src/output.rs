//! Printing data for people (aligned tables) and for scripts (JSON).

use std::fmt::Write as _;

/// `-o` of every command that prints data, spelled as kubectl spells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum OutputFormat {
    /// Aligned columns for people.
    #[default]
    Table,
    /// The table with more columns.
    Wide,
    /// One JSON document for scripts (lists: `{"kind": "List", "items": [...]}`).
    Json,
    /// The JSON document as YAML.
    Yaml,
    /// NAMESPACE/NAME per line: what the batch commands take.
    Name,
}

impl OutputFormat {
    pub fn label(self) -> &'static str {
        match self {
            Self::Table => "table",
            Self::Wide => "wide",
            Self::Json => "json",
            Self::Yaml => "yaml",
            Self::Name => "name",
        }
    }
}

/// `-o FORMAT` and `--no-headers`, shared by every command that prints data.
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct OutputArgs {
    /// Output format: table, wide (more columns), json, yaml, name (NAMESPACE/NAME per line)
    #[cfg_attr(feature = "clap", arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table))]
    pub format: OutputFormat,
    /// Leave out the table's header line
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_headers: bool,
}

impl OutputArgs {
    /// Refuse `-o name` before any work, for commands that print one document.
    pub fn refuse_name(&self, command: &str) -> Result<(), UnsupportedFormat> {
        if self.format == OutputFormat::Name {
            return Err(UnsupportedFormat {
                command: command.into(),
                format: OutputFormat::Name.label(),
                supported: "table, wide, json, yaml".into(),
            });
        }
        Ok(())
    }
}

/// `-o` of commands that print one document rather than a list of objects: no `name`, so
/// `--help` offers only what works.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum DocumentFormat {
    /// Aligned columns for people.
    #[default]
    Table,
    /// The table with more columns.
    Wide,
    /// One JSON document for scripts.
    Json,
    /// The JSON document as YAML.
    Yaml,
}

/// `-o FORMAT` and `--no-headers` of a command that prints one document (`fleet`).
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DocumentOutputArgs {
    /// Output format: table, wide (more columns), json, yaml
    #[cfg_attr(feature = "clap", arg(short = 'o', long = "output", value_enum, default_value_t = DocumentFormat::Table))]
    pub format: DocumentFormat,
    /// Leave out the table's header line
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_headers: bool,
}

impl From<DocumentOutputArgs> for OutputArgs {
    fn from(args: DocumentOutputArgs) -> Self {
        let format = match args.format {
            DocumentFormat::Table => OutputFormat::Table,
            DocumentFormat::Wide => OutputFormat::Wide,
            DocumentFormat::Json => OutputFormat::Json,
            DocumentFormat::Yaml => OutputFormat::Yaml,
        };
        Self { format, no_headers: args.no_headers }
    }
}

/// A format this command does not print (a usage error).
#[derive(Debug, thiserror::Error)]
#[error("`{command}` does not print -o {format}; use one of: {supported}")]
pub struct UnsupportedFormat {
    pub command: String,
    pub format: &'static str,
    pub supported: String,
}

/// What a command prints, in every form: the table (wide columns marked), one JSON document
/// (YAML is its translation), and for lists of objects their names.
pub struct Printable {
    pub table: Table,
    pub document: serde_json::Value,
    /// `None`: the data is not a list of objects, `-o name` is refused.
    pub names: Option<Vec<String>>,
}

impl Printable {
    /// A list of objects: the document is `{"kind": "List", "items": [...]}`, like kubectl's.
    pub fn list(table: Table, items: Vec<serde_json::Value>, names: Vec<String>) -> Self {
        Self { table, document: serde_json::json!({"kind": "List", "items": items}), names: Some(names) }
    }

    pub fn render(&self, output: &OutputArgs, command: &str) -> Result<String, UnsupportedFormat> {
        Ok(match output.format {
            OutputFormat::Table => self.table.render_with(false, !output.no_headers),
            OutputFormat::Wide => self.table.render_with(true, !output.no_headers),
            OutputFormat::Json => json(&self.document),
            OutputFormat::Yaml => yaml(&self.document),
            OutputFormat::Name => match &self.names {
                Some(names) => names.iter().map(|name| format!("{}\n", terminal_safe(name, false))).collect(),
                None => {
                    return Err(UnsupportedFormat {
                        command: command.into(),
                        format: OutputFormat::Name.label(),
                        supported: "table, wide, json, yaml".into(),
                    });
                }
            },
        })
    }
}

/// Print one document (not a list of objects): JSON/YAML from `document`, the table from
/// `table(wide, headers)`; `-o name` is refused.
pub fn render_object(
    output: &OutputArgs,
    command: &str,
    document: &serde_json::Value,
    table: impl FnOnce(bool, bool) -> String,
) -> Result<String, UnsupportedFormat> {
    Ok(match output.format {
        OutputFormat::Table => terminal_safe(&table(false, !output.no_headers), true).into_owned(),
        OutputFormat::Wide => terminal_safe(&table(true, !output.no_headers), true).into_owned(),
        OutputFormat::Json => json(document),
        OutputFormat::Yaml => yaml(document),
        OutputFormat::Name => {
            return Err(UnsupportedFormat {
                command: command.into(),
                format: OutputFormat::Name.label(),
                supported: "table, wide, json, yaml".into(),
            });
        }
    })
}

/// A plain text table: a header row and left-aligned columns separated by three spaces,
/// like `kubectl get`. Columns marked wide show only with `-o wide`.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    wide: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Self::with_wide(header, &[])
    }

    /// `header` columns always, then `wide` columns with `-o wide` only; rows give both.
    pub fn with_wide(header: &[&str], wide: &[&str]) -> Self {
        Self {
            header: header.iter().chain(wide).map(|cell| (*cell).to_string()).collect(),
            wide: header.iter().map(|_| false).chain(wide.iter().map(|_| true)).collect(),
            rows: Vec::new(),
        }
    }

    /// A row; every cell is made [`terminal_safe`] (one line, no control characters).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.into_iter().map(|cell| terminal_safe(&cell, false).into_owned()).collect());
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        self.render_with(false, true)
    }

    pub fn render_with(&self, wide: bool, headers: bool) -> String {
        self.render_aligned(wide, headers, &[])
    }

    /// Each column's width: its widest cell, the header included.
    pub fn widths(&self) -> Vec<usize> {
        let mut widths = vec![0; self.header.len()];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (index, cell) in row.iter().enumerate().take(self.header.len()) {
                widths[index] = widths[index].max(cell.chars().count());
            }
        }
        widths
    }

    /// [`Self::render_with`], each column at least as wide as `at_least` says: rows printed later
    /// (`-w`) line up under the table printed first.
    pub fn render_aligned(&self, wide: bool, headers: bool, at_least: &[usize]) -> String {
        let shown: Vec<usize> = (0..self.header.len()).filter(|&index| wide || !self.wide[index]).collect();
        let lines: Vec<&Vec<String>> = if headers {
            std::iter::once(&self.header).chain(&self.rows).collect()
        } else {
            self.rows.iter().collect()
        };
        let mut widths: Vec<usize> =
            (0..self.header.len()).map(|index| at_least.get(index).copied().unwrap_or(0)).collect();
        for row in &lines {
            for (index, cell) in row.iter().enumerate().take(self.header.len()) {
                widths[index] = widths[index].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in lines {
            let mut line = String::new();
            for (position, &index) in shown.iter().enumerate() {
                let cell = row.get(index).map_or("", String::as_str);
                if position + 1 == shown.len() {
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

/// The document as YAML (what `-o yaml` prints).
pub fn yaml(value: &serde_json::Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|error| format!("# cannot print as YAML: {error}\n"))
}

/// `text` fit for a terminal: every C0 and C1 control character (and DEL) shown as a visible
/// escape (`\x1b`, `\x9b`) instead of being sent, so cluster data — a reason, a tenant's
/// subdomain, a Lease holder, a context name — can never move the cursor, retitle the window,
/// clear the screen or write the clipboard (OSC 52). `keep_newlines` keeps `\n` for multi-line
/// text; a table cell escapes it too. JSON and YAML need none of this: their encoders escape.
pub fn terminal_safe(text: &str, keep_newlines: bool) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| (c.is_control() && !(keep_newlines && c == '\n')) || is_format_character(c);
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            // Both spellings are escapes a YAML double-quoted string reads back exactly too.
            if u32::from(c) < 0x100 {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            } else {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `text` for a chat line or an incident's summary, where an escape would only confuse: every
/// control character (a newline too, which would forge a line of its own in a shared channel)
/// becomes a space, and the invisible and bidirectional format characters are dropped.
pub fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() || is_format_character(c)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let out = text.chars().filter(|c| !is_format_character(*c)).map(|c| if c.is_control() { ' ' } else { c }).collect();
    std::borrow::Cow::Owned(out)
}

/// The invisible and bidirectional format characters (Unicode's category Cf, and the line and
/// paragraph separators): an override (U+202E) or a mark (U+061C) changes how the rest of the line
/// reads, a zero-width space, a soft hyphen or a tag character (U+E0000…) hides in a name.
fn is_format_character(c: char) -> bool {
    matches!(
        c,
        '\u{7f}'
            | '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{890}'..='\u{891}'
            | '\u{8e2}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
    )
}

/// One JSON document on one line (`-w` streams), escaped as [`json`] escapes.
pub fn json_line<T: serde::Serialize>(value: &T) -> serde_json::Result<String> {
    Ok(format!("{}\n", escape_c1(&serde_json::to_string(value)?)))
}

/// `eprintln!` whose text is [`terminal_safe`]: errors and notes quote cluster data (names,
/// reasons, context names) too.
#[macro_export]
macro_rules! safe_eprintln {
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::output::terminal_safe(&format!($($arg)*), true))
    };
}

/// A writer that makes everything it passes on [`terminal_safe`] (newlines kept): stdout of the
/// commands that print text built from cluster data.
pub struct SafeOut<W: std::io::Write>(pub W);

impl<W: std::io::Write> std::io::Write for SafeOut<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(terminal_safe(&text, true).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Print `text` on stdout, [`terminal_safe`] (JSON and YAML pass unchanged: their encoders
/// already escape every control character).
pub fn print(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    SafeOut(std::io::stdout().lock()).write_all(text.as_bytes())
}

/// What replaces a value people must not see (a Secret value, an env value, a credential in a
/// log line).
pub const MASK: &str = "•••";

/// `1 Deployment`, `3 Deployments`.
pub fn count(n: usize, singular: &str) -> String {
    if n == 1 { format!("1 {singular}") } else { format!("{n} {singular}s") }
}

/// Pretty JSON with a trailing newline.
pub fn json(value: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into());
    text.push('\n');
    escape_c1(&text)
}

/// serde_json escapes C0 controls in strings but passes DEL and the C1 controls (U+0080–U+009F,
/// one of them a CSI) and the format characters through raw: escape those as `\uXXXX` too. Outside strings JSON is ASCII
/// without them, so this changes no structure and the document reads back exactly.
pub fn escape_c1(text: &str) -> String {
    let escaped = |c: char| (c.is_control() && c != '\n' && c != '\t') || is_format_character(c);
    if !text.chars().any(escaped) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escaped(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_leaves_no_control_or_format_character() {
        let hostile = "a\u{7}\u{1b}[31mRED\u{1b}[0m\nline2\r\n\u{202e}RTL\u{200b}\u{9b}\u{2028}z\tq\u{61c}\u{2060}\u{ad}\u{e0041}\u{180e}\u{206a}\u{fff9}";
        let line = one_line(hostile);
        assert_eq!(line, "a  [31mRED [0m line2  RTL z q");
        assert!(!line.chars().any(|c| c.is_control() || is_format_character(c)), "{line:?}");
        assert!(matches!(one_line("plain – text ü"), std::borrow::Cow::Borrowed(_)));
    }

    /// JSON and YAML documents go through the terminal filter on their way out too: what they
    /// print must read back as the same document, whatever the strings hold.
    #[test]
    fn documents_read_back_exactly_after_the_terminal_filter() {
        let hostile =
            "x\u{1b}]0;pwned\u{7}\rOVER\u{9b}31m\u{7f}\u{85}a\u{202e}b\u{200b}c\u{feff}d\u{2028}e\u{2066}\tf\ng";
        let value = serde_json::json!({"name": hostile, "list": [hostile, "plain"], hostile: 1});
        let printed = terminal_safe(&json(&value), true).into_owned();
        assert!(!printed.chars().any(|c| c.is_control() && c != '\n'), "{printed}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&printed).expect("json reads back"), value);
        let line = terminal_safe(&json_line(&value).expect("json"), true).into_owned();
        assert_eq!(line.lines().count(), 1, "{line}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&line).expect("json line reads back"), value);
        let printed = terminal_safe(&yaml(&value), true).into_owned();
        assert!(!printed.chars().any(|c| c.is_control() && c != '\n'), "{printed}");
        assert_eq!(serde_saphyr::from_str::<serde_json::Value>(&printed).expect("yaml reads back"), value, "{printed}");
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let hostile = "x\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}]52;c;SGVsbG8=\u{7}\rOVER\u{9b}31m\u{7f}";
        let safe = terminal_safe(hostile, false);
        assert_eq!(safe, "x\\x1b]0;pwned\\x07\\x1b[2J\\x1b]52;c;SGVsbG8=\\x07\\x0dOVER\\x9b31m\\x7f");
        assert!(!safe.chars().any(char::is_control));
        assert_eq!(terminal_safe("a\nb", true), "a\nb", "multi-line text keeps its lines");
        assert_eq!(terminal_safe("a\nb", false), "a\\x0ab", "a cell is one line");
        assert!(matches!(terminal_safe("plain · ünïcode", false), std::borrow::Cow::Borrowed(_)));
        assert_eq!(terminal_safe("eve\u{202e}gnp.exe\u{200b}", false), "eve\\u202egnp.exe\\u200b", "bidi, invisible");
        let mut table = Table::new(&["NAME", "BY"]);
        table.row(vec!["b".into(), hostile.into()]);
        assert!(!table.render_with(true, true).chars().any(|c| c.is_control() && c != '\n'));
        let mut out = Vec::new();
        std::io::Write::write_all(&mut SafeOut(&mut out), format!("{hostile}\n").as_bytes()).expect("write");
        let written = String::from_utf8(out).expect("utf-8");
        assert!(!written.chars().any(|c| c.is_control() && c != '\n'), "{written}");
        // JSON and YAML carry the value exactly, with no control character on the wire.
        let document = serde_json::json!({"by": hostile});
        for text in [json(&document), yaml(&document)] {
            assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text}");
            assert_eq!(terminal_safe(&text, true), text, "printing leaves it unchanged");
        }
        let back: serde_json::Value = serde_json::from_str(&json(&document)).expect("json");
        assert_eq!(back, document);
        let back: serde_json::Value = serde_saphyr::from_str(&yaml(&document)).expect("yaml");
        assert_eq!(back, document);
    }

    #[test]
    fn columns_align_to_the_widest_cell() {
        let mut table = Table::new(&["NAME", "STATE"]);
        table.row(vec!["a".into(), "Ready".into()]);
        table.row(vec!["longer-name".into(), String::new()]);
        assert_eq!(table.render(), "NAME          STATE\na             Ready\nlonger-name\n");
    }

    #[test]
    fn wide_columns_and_headers_are_chosen_when_rendering() {
        let mut table = Table::with_wide(&["NAME", "STATE"], &["REASON"]);
        table.row(vec!["a".into(), "Failed".into(), "ProgressDeadlineExceeded".into()]);
        assert_eq!(table.render_with(false, true), "NAME   STATE\na      Failed\n");
        assert_eq!(table.render_with(true, true), "NAME   STATE    REASON\na      Failed   ProgressDeadlineExceeded\n");
        assert_eq!(table.render_with(false, false), "a   Failed\n", "without headers the widths follow the rows");
    }

    #[test]
    fn every_format_prints_the_same_data() {
        let mut table = Table::new(&["NAME"]);
        table.row(vec!["b1".into()]);
        let list = Printable::list(table, vec![serde_json::json!({"name": "b1"})], vec!["ns/b1".into()]);
        let print = |format| list.render(&OutputArgs { format, no_headers: false }, "batches").expect("printed");
        assert_eq!(print(OutputFormat::Name), "ns/b1\n");
        let json: serde_json::Value = serde_json::from_str(&print(OutputFormat::Json)).expect("json");
        assert_eq!(json, serde_json::json!({"kind": "List", "items": [{"name": "b1"}]}));
        let yaml: serde_json::Value = serde_saphyr::from_str(&print(OutputFormat::Yaml)).expect("yaml");
        assert_eq!(yaml, json, "-o yaml is the JSON document");
        let object = Printable { table: Table::new(&["X"]), document: serde_json::json!({}), names: None };
        let refused = object.render(&OutputArgs { format: OutputFormat::Name, no_headers: false }, "doctor");
        assert_eq!(
            refused.map_err(|e| e.to_string()),
            Err("`doctor` does not print -o name; use one of: table, wide, json, yaml".to_string())
        );
    }
}

/// A batch window as people say it: "ends in 4m", "ended 2m ago".
pub fn window_text(window_end: k8s_openapi::jiff::Timestamp, now: k8s_openapi::jiff::Timestamp) -> String {
    let seconds = window_end.as_second() - now.as_second();
    if seconds > 0 {
        format!("ends in {}", human_duration(seconds))
    } else {
        format!("ended {} ago", human_duration(-seconds))
    }
}

/// [`human_duration`] of a span that may be negative (`-50m` for a margin below zero): what
/// tables show for a time left, as the console does.
pub fn signed_duration(seconds: i64) -> String {
    if seconds < 0 { format!("-{}", human_duration(seconds.saturating_neg())) } else { human_duration(seconds) }
}

/// kubectl's age format (`k8s.io/apimachinery/pkg/util/duration.HumanDuration`): `45s`, `5m30s`,
/// `3h`, `2d4h`, `1y30d`.
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
