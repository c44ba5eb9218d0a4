//! Views as types: everything about one view — its title and `:` aliases, columns (with
//! priorities and width bounds, see `table`), the cells of a row and their styles, the row's key,
//! search text and sort keys, where Enter leads, the detail pane and the YAML — lives in one
//! file under `views/`. Adding a view is that file, a `ViewKind` variant and one line in
//! [`view`]. A state gets its colour in one place, `theme` (`batch_state_style`, `rollout_state_style`, `state_style`).

mod applications;
mod batches;
mod credentials;
mod detail_lines;
mod events;
mod fleet;
mod operations;
mod rollouts;
mod tenants;
mod versions;

use ratatui::style::Style;
use ratatui::text::Line;
use serde_json::Value;

use super::app::{App, Focus, Route, RowKey, ViewKind};
use super::strings::relative;
use super::table::Column;
use super::theme::{batch_state_style, rollout_state_style, state_style};
use crate::api::ObjectKey;
use crate::readmodel::Snapshot;

pub use detail_lines::tenants_served;
pub use fleet::fleet_row_route;

/// The cells of one row and the row's own style (a stalled rollout is red as a whole).
pub struct RowCells {
    pub cells: Vec<Line<'static>>,
    pub style: Option<Style>,
}

impl RowCells {
    pub fn new(cells: Vec<Line<'static>>) -> Self {
        Self { cells, style: None }
    }

    pub fn styled(self, style: Style) -> Self {
        Self { style: Some(style), ..self }
    }
}

/// One view, written against its own row type.
pub trait ViewSpec: Sync {
    type Row;
    const TITLE: &'static str;
    /// `:` commands that open the view.
    const ALIASES: &'static [&'static str];
    const COLUMNS: &'static [Column];
    /// Whether the batch keys (approve, force, hold, cancel) act on its rows.
    const BATCH_KEYS: bool = false;
    /// Whether the freeze keys (freeze, unfreeze) act on its rows' applications (`owner`).
    const FREEZE_KEYS: bool = false;

    fn rows(snapshot: &Snapshot) -> &[Self::Row];
    /// A stable identity, to keep a row selected when the data changes.
    fn key(row: &Self::Row) -> RowKey;
    /// (namespace, application) the row belongs to.
    fn owner(row: &Self::Row) -> (&str, &str);
    /// Whether the row is inside a focus other than an application's; `None`: the focus does
    /// not narrow this view.
    fn narrowed(_row: &Self::Row, _focus: &Focus) -> Option<bool> {
        None
    }
    /// The text a `/` filter searches.
    fn search_text(row: &Self::Row) -> String;
    fn cells(app: &App, row: &Self::Row) -> RowCells;
    /// How column `column` sorts; by default its text, numbers in it compared as numbers.
    fn sort_key(_app: &App, _row: &Self::Row, _column: usize) -> Option<SortKey> {
        None
    }
    /// Where Enter leads; `None` opens the detail pane.
    fn drill(_row: &Self::Row) -> Option<Route> {
        None
    }
    /// `(title, lines)` of the detail pane.
    fn detail(app: &App, row: &Self::Row) -> (String, Vec<String>);
    /// What the detail pane needs worked out (off the UI) when it opens.
    fn detail_needs(_row: &Self::Row) -> Option<DetailNeed> {
        None
    }
    /// `(title, object)` for the YAML view; `None` when the row has no object.
    fn yaml(_snapshot: &Snapshot, _row: &Self::Row) -> Option<(String, Result<Value, String>)> {
        None
    }
    /// The batch the row points at, for the batch keys.
    fn batch(_row: &Self::Row) -> Option<ObjectKey> {
        None
    }
    /// The Deployment whose ReplicaSets and Pods Enter shows, if any.
    fn workload(_row: &Self::Row) -> Option<ObjectKey> {
        None
    }
}

/// A view as the console uses it: rows addressed by their index in the snapshot.
pub trait View: Sync {
    fn title(&self) -> &'static str;
    fn aliases(&self) -> &'static [&'static str];
    fn columns(&self) -> &'static [Column];
    fn batch_keys(&self) -> bool;
    fn freeze_keys(&self) -> bool;
    fn len(&self, snapshot: &Snapshot) -> usize;
    fn key(&self, snapshot: &Snapshot, index: usize) -> Option<RowKey>;
    fn in_focus(&self, snapshot: &Snapshot, index: usize, focus: &Focus) -> bool;
    fn search_text(&self, snapshot: &Snapshot, index: usize) -> Option<String>;
    fn cells(&self, app: &App, index: usize) -> Option<RowCells>;
    fn sort_key(&self, app: &App, index: usize, column: usize) -> Option<SortKey>;
    fn drill(&self, snapshot: &Snapshot, index: usize) -> Option<Route>;
    fn detail(&self, app: &App, index: usize) -> Option<(String, Vec<String>)>;
    fn detail_needs(&self, snapshot: &Snapshot, index: usize) -> Option<DetailNeed>;
    fn yaml(&self, snapshot: &Snapshot, index: usize) -> Option<(String, Result<Value, String>)>;
    fn batch(&self, snapshot: &Snapshot, index: usize) -> Option<ObjectKey>;
    /// The application the freeze keys act on, in a view that has them.
    fn application(&self, snapshot: &Snapshot, index: usize) -> Option<ObjectKey>;
    fn workload(&self, snapshot: &Snapshot, index: usize) -> Option<ObjectKey>;
}

impl<V: ViewSpec> View for V {
    fn title(&self) -> &'static str {
        V::TITLE
    }
    fn aliases(&self) -> &'static [&'static str] {
        V::ALIASES
    }
    fn columns(&self) -> &'static [Column] {
        V::COLUMNS
    }
    fn batch_keys(&self) -> bool {
        V::BATCH_KEYS
    }
    fn freeze_keys(&self) -> bool {
        V::FREEZE_KEYS
    }
    fn len(&self, snapshot: &Snapshot) -> usize {
        V::rows(snapshot).len()
    }
    fn key(&self, snapshot: &Snapshot, index: usize) -> Option<RowKey> {
        V::rows(snapshot).get(index).map(V::key)
    }
    fn in_focus(&self, snapshot: &Snapshot, index: usize, focus: &Focus) -> bool {
        let Some(row) = V::rows(snapshot).get(index) else { return false };
        match focus {
            Focus::Application { namespace, name } => V::owner(row) == (namespace.as_str(), name.as_str()),
            other => V::narrowed(row, other).unwrap_or(true),
        }
    }
    fn search_text(&self, snapshot: &Snapshot, index: usize) -> Option<String> {
        V::rows(snapshot).get(index).map(|row| V::search_text(row).to_lowercase())
    }
    fn cells(&self, app: &App, index: usize) -> Option<RowCells> {
        V::rows(&app.snapshot).get(index).map(|row| V::cells(app, row))
    }
    fn sort_key(&self, app: &App, index: usize, column: usize) -> Option<SortKey> {
        let row = V::rows(&app.snapshot).get(index)?;
        V::sort_key(app, row, column).or_else(|| {
            let cells = V::cells(app, row);
            cells.cells.get(column).map(|cell| SortKey::text(&cell.to_string()))
        })
    }
    fn drill(&self, snapshot: &Snapshot, index: usize) -> Option<Route> {
        V::rows(snapshot).get(index).and_then(V::drill)
    }
    fn detail(&self, app: &App, index: usize) -> Option<(String, Vec<String>)> {
        V::rows(&app.snapshot).get(index).map(|row| V::detail(app, row))
    }
    fn detail_needs(&self, snapshot: &Snapshot, index: usize) -> Option<DetailNeed> {
        V::rows(snapshot).get(index).and_then(V::detail_needs)
    }
    fn yaml(&self, snapshot: &Snapshot, index: usize) -> Option<(String, Result<Value, String>)> {
        V::rows(snapshot).get(index).and_then(|row| V::yaml(snapshot, row))
    }
    fn batch(&self, snapshot: &Snapshot, index: usize) -> Option<ObjectKey> {
        V::rows(snapshot).get(index).and_then(V::batch)
    }
    fn application(&self, snapshot: &Snapshot, index: usize) -> Option<ObjectKey> {
        let row = V::rows(snapshot).get(index).filter(|_| V::FREEZE_KEYS)?;
        let (namespace, name) = V::owner(row);
        Some(ObjectKey::new(namespace, name))
    }
    fn workload(&self, snapshot: &Snapshot, index: usize) -> Option<ObjectKey> {
        V::rows(snapshot).get(index).and_then(V::workload)
    }
}

/// Work a detail pane asks the runtime for when it opens (too slow to do on every snapshot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DetailNeed {
    /// An application's subscription dependencies (reads its binding Secrets).
    Dependencies { namespace: String, name: String },
}

/// The registry: which type is which view.
pub fn view(kind: ViewKind) -> &'static dyn View {
    match kind {
        ViewKind::Applications => &applications::Applications,
        ViewKind::Versions => &versions::Versions,
        ViewKind::Tenants => &tenants::Tenants,
        ViewKind::Operations => &operations::Operations,
        ViewKind::Batches => &batches::Batches,
        ViewKind::Rollouts => &rollouts::Rollouts,
        ViewKind::Events => &events::Events,
        ViewKind::Credentials => &credentials::Credentials,
        ViewKind::Fleet => &fleet::Fleet,
    }
}

/// The columns of a view, left to right.
pub fn columns(kind: ViewKind) -> &'static [Column] {
    view(kind).columns()
}

/// The cells of row `index` of a view.
pub fn cells(app: &App, kind: ViewKind, index: usize) -> Option<RowCells> {
    view(kind).cells(app, index)
}

/// What a column sorts by: a number (times, counts) or text in natural order (`t2` before `t10`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SortKey {
    Number(i64),
    Text(Vec<TextChunk>),
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TextChunk {
    Digits(u128),
    Letters(String),
}

impl SortKey {
    pub fn text(text: &str) -> Self {
        let mut chunks = Vec::new();
        let mut rest = text.trim();
        while let Some(first) = rest.chars().next() {
            let digits = first.is_ascii_digit();
            let end = rest.find(|c: char| c.is_ascii_digit() != digits).unwrap_or(rest.len());
            let (chunk, tail) = rest.split_at(end);
            chunks.push(match chunk.parse::<u128>() {
                Ok(number) if digits => TextChunk::Digits(number),
                _ => TextChunk::Letters(chunk.to_lowercase()),
            });
            rest = tail;
        }
        Self::Text(chunks)
    }

    /// A point in time; unknown times sort first.
    pub fn time(time: Option<k8s_openapi::jiff::Timestamp>) -> Self {
        Self::Number(time.map_or(i64::MIN, |t| t.as_second()))
    }
}

/// The sort key of an AGE column: older is greater, as a larger age.
fn age_key(time: Option<k8s_openapi::jiff::Timestamp>) -> SortKey {
    SortKey::Number(time.map_or(i64::MIN, |t| -t.as_second()))
}

/// How long ago, in the one relative-time format.
pub fn age(app: &App, time: Option<k8s_openapi::jiff::Timestamp>) -> String {
    time.map_or_else(|| "-".into(), |t| relative(app.now.as_second() - t.as_second()))
}

/// `revocable in 3h12m` — or, once past, `revocable since 5m (may already be revoked)`.
pub fn revocable(at: k8s_openapi::jiff::Timestamp, now: k8s_openapi::jiff::Timestamp) -> String {
    let seconds = at.as_second() - now.as_second();
    if seconds > 0 {
        format!("revocable in {}", relative(seconds))
    } else {
        format!("revocable since {} (may already be revoked)", relative(-seconds))
    }
}

/// A batch window: `in 4m` (still collecting) or `2m ago` (ended).
pub fn window(end: k8s_openapi::jiff::Timestamp, now: k8s_openapi::jiff::Timestamp) -> String {
    if crate::api::lenient::is_forever(end) {
        return "never".into();
    }
    let seconds = end.as_second() - now.as_second();
    if seconds > 0 { format!("in {}", relative(seconds)) } else { format!("{} ago", relative(-seconds)) }
}

/// A batch's collection window in the console's words: `in 4m` while it collects, `2m ago` once
/// ended, `forced 2m ago`, `ended early` (it went on before its end); `-` once the batch is over.
pub fn collection_window(batch: &crate::api::RotationBatch, now: k8s_openapi::jiff::Timestamp) -> String {
    use crate::readmodel::CollectionWindow;
    if batch.is_terminal() {
        return "-".into();
    }
    match CollectionWindow::of(batch, now) {
        CollectionWindow::Ends(at) | CollectionWindow::Ended(at) => window(at, now),
        CollectionWindow::Forced(at) => format!("forced {}", window(at, now)),
        CollectionWindow::EndedEarly => "ended early".into(),
    }
}

/// When a batch goes on: the time it waits for (`opens in 3h12m`, `until in 2d4h`), else its
/// collection window.
pub fn batch_when(
    batch: &crate::api::RotationBatch,
    state: &crate::readmodel::BatchState,
    now: k8s_openapi::jiff::Timestamp,
) -> String {
    state.when(now, &relative).unwrap_or_else(|| collection_window(batch, now))
}
