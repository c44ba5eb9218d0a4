//! Fitting a view's columns to the terminal: columns carry a priority and width bounds, a narrow
//! terminal drops the least important columns instead of cutting every one, cells that are still
//! too long end in `…`, and the wide mode shows every column at its natural width with
//! horizontal scrolling.

use ratatui::text::{Line, Span};

/// One column of a view.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub header: &'static str,
    /// 0 is never dropped; higher numbers are dropped first when the terminal is narrow.
    pub priority: u8,
    /// Never narrower than this (unless it is the only column left).
    pub min: u16,
    /// Never wider than this, however long its cells (the last column takes what is left).
    pub max: u16,
    /// Never cut (names that tell two objects apart): its width is its longest cell's.
    pub whole: bool,
    /// Only in the wide mode (`w`).
    pub wide_only: bool,
}

impl Column {
    pub const fn new(header: &'static str, priority: u8, min: u16, max: u16) -> Self {
        Self { header, priority, min, max, whole: false, wide_only: false }
    }

    /// A column whose cells are never cut.
    pub const fn whole(self) -> Self {
        Self { whole: true, ..self }
    }

    pub const fn wide_only(self) -> Self {
        Self { wide_only: true, ..self }
    }
}

/// Space between two columns.
pub const SPACING: u16 = 1;

/// Which columns show and how wide, for `width` cells of terminal. The widths never add up to
/// more than `width`, so every cut is made by [`fit`], with its `…`, never by the terminal edge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnPlan {
    /// (index into the view's columns, width), left to right.
    pub shown: Vec<(usize, u16)>,
    /// Columns left out to fit (their headers), for the title line.
    pub hidden: Vec<&'static str>,
    /// Wide mode: columns scrolled off to the left, and columns past the right edge (→ shows them).
    pub left: usize,
    pub right: usize,
}

/// Plan the columns. `natural[i]` is the widest cell (header included) of column `i` among the
/// rows on screen. `wide`: every column at its full width, uncut, from column `offset` (the
/// horizontal scroll) as far as whole columns fit; otherwise low-priority columns are dropped
/// until the rest fit, and what still does not fit is taken from the widest cells, of the
/// droppable columns first.
pub fn plan(columns: &[Column], natural: &[u16], width: u16, wide: bool, offset: usize) -> ColumnPlan {
    let content = |index: usize| natural.get(index).copied().unwrap_or(0).max(text_width(columns[index].header));
    // What the column's cells (and header) need, capped by its maximum unless it is whole.
    let natural_of = |index: usize| {
        let column = &columns[index];
        if column.whole { content(index) } else { content(index).min(column.max.max(column.min)) }
    };
    let mut candidates: Vec<usize> = (0..columns.len()).filter(|&i| wide || !columns[i].wide_only).collect();
    let mut hidden = Vec::new();
    if wide {
        return plan_wide(columns, &candidates, &content, width, offset);
    }
    let needed = |set: &[usize], widths: &dyn Fn(usize) -> u16| -> u32 {
        set.iter().map(|&i| u32::from(widths(i))).sum::<u32>() + u32::from(SPACING) * set.len().saturating_sub(1) as u32
    };
    // A column never needs more than its content, whatever its configured minimum.
    let min_of =
        |index: usize| if columns[index].whole { natural_of(index) } else { columns[index].min.min(natural_of(index)) };
    // Drop the least important column (rightmost first among equals) while even the minimum
    // widths do not fit.
    while needed(&candidates, &min_of) > u32::from(width) {
        let Some(position) = candidates
            .iter()
            .enumerate()
            .filter(|(_, i)| columns[**i].priority > 0)
            .max_by_key(|(position, i)| (columns[**i].priority, *position))
            .map(|(position, _)| position)
        else {
            break;
        };
        hidden.push(columns[candidates.remove(position)].header);
    }
    // Start at the natural widths and take what does not fit from the widest column, one cell
    // at a time, down to its minimum (among equals the least important, rightmost, gives first):
    // a long message loses its tail before a short version loses its meaning. The columns that
    // are never dropped (priority 0: names, states) give way only when the others are at their
    // minimum.
    let mut widths: Vec<u16> = candidates.iter().map(|&i| natural_of(i)).collect();
    let spacing = u32::from(SPACING) * u32::try_from(widths.len().saturating_sub(1)).unwrap_or(0);
    let used = |widths: &[u16]| widths.iter().map(|&w| u32::from(w)).sum::<u32>() + spacing;
    let mut over = used(&widths).saturating_sub(u32::from(width));
    for lowest_priority in [1, 0] {
        while over > 0 {
            let Some(widest) = (0..widths.len())
                .filter(|&position| {
                    let column = candidates[position];
                    columns[column].priority >= lowest_priority && widths[position] > min_of(column)
                })
                .max_by_key(|&position| (widths[position], columns[candidates[position]].priority, position))
            else {
                break;
            };
            widths[widest] -= 1;
            over -= 1;
        }
    }
    // Only columns that are never dropped are left and even their minimums do not fit: take
    // from the widest, one cell at a time, so each is cut with `…` rather than clipped.
    while over > 0 {
        let Some(widest) = widths.iter_mut().filter(|w| **w > 1).max_by_key(|w| **w) else { break };
        *widest -= 1;
        over -= 1;
    }
    // What is left goes to the last column (its text is often a message).
    let spare = u32::from(width).saturating_sub(used(&widths));
    if let Some(last) = widths.last_mut() {
        *last = last.saturating_add(u16::try_from(spare).unwrap_or(u16::MAX));
    }
    ColumnPlan { shown: candidates.into_iter().zip(widths).collect(), hidden, left: 0, right: 0 }
}

/// The wide mode: from column `offset`, every column at its full width while whole columns fit;
/// the first one shown is cut (with `…`) only when it alone is wider than the terminal.
fn plan_wide(
    columns: &[Column],
    candidates: &[usize],
    content: &dyn Fn(usize) -> u16,
    width: u16,
    offset: usize,
) -> ColumnPlan {
    let skip = offset.min(candidates.len().saturating_sub(1));
    let mut shown = Vec::new();
    let mut used: u32 = 0;
    for &index in &candidates[skip..] {
        let gap = if shown.is_empty() { 0 } else { u32::from(SPACING) };
        let full = u32::from(content(index));
        if shown.is_empty() {
            shown.push((index, u16::try_from(full.min(u32::from(width))).unwrap_or(width)));
            used = full.min(u32::from(width));
        } else if used + gap + full <= u32::from(width) {
            shown.push((index, content(index)));
            used += gap + full;
        } else {
            break;
        }
    }
    let right = candidates.len() - skip - shown.len();
    let hidden =
        candidates[..skip].iter().chain(&candidates[skip + shown.len()..]).map(|&i| columns[i].header).collect();
    ColumnPlan { shown, hidden, left: skip, right }
}

pub fn text_width(text: &str) -> u16 {
    u16::try_from(Line::raw(text).width()).unwrap_or(u16::MAX)
}

/// Cut a cell to `width`, ending in `…` when anything was cut.
pub fn fit(line: Line<'static>, width: u16) -> Line<'static> {
    let width = usize::from(width);
    if line.width() <= width {
        return line;
    }
    if width == 0 {
        return Line::default();
    }
    let mut left = width - 1; // room for the ellipsis
    let mut spans = Vec::new();
    let mut last_style = line.style;
    for span in line.spans {
        if left == 0 {
            break;
        }
        let mut kept = String::new();
        for ch in span.content.chars() {
            let w = unicode_width(ch);
            if w > left {
                left = 0;
                break;
            }
            left -= w;
            kept.push(ch);
        }
        last_style = span.style;
        spans.push(Span::styled(kept, span.style));
    }
    spans.push(Span::styled("…", last_style));
    Line::from(spans).style(line.style)
}

pub fn unicode_width(ch: char) -> usize {
    Line::raw(ch.to_string()).width()
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLUMNS: &[Column] = &[
        Column::new("NAMESPACE", 2, 9, 12),
        Column::new("NAME", 0, 4, 40).whole(),
        Column::new("PHASE", 0, 8, 16),
        Column::new("AGE", 1, 3, 6),
        Column::new("MESSAGE", 3, 10, 60),
        Column::new("TENANTS", 0, 7, 7).wide_only(),
    ];

    #[test]
    fn a_narrow_terminal_drops_low_priority_columns_and_keeps_names_whole() {
        let natural = [8, 15, 16, 5, 40, 7];
        let wide = plan(COLUMNS, &natural, 200, false, 0);
        assert_eq!(wide.shown.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 1, 2, 3, 4], "wide-only stays out");
        let narrow = plan(COLUMNS, &natural, 40, false, 0);
        let headers: Vec<&str> = narrow.shown.iter().map(|(i, _)| COLUMNS[*i].header).collect();
        assert_eq!(headers, ["NAMESPACE", "NAME", "PHASE", "AGE"], "MESSAGE (priority 3) went first");
        assert_eq!(narrow.hidden, ["MESSAGE"]);
        assert_eq!(narrow.shown[1].1, 15, "the name keeps its full width");
        let tiny = plan(COLUMNS, &natural, 20, false, 0);
        let headers: Vec<&str> = tiny.shown.iter().map(|(i, _)| COLUMNS[*i].header).collect();
        assert_eq!(headers, ["NAME", "PHASE"], "priority 0 columns stay even when they do not fit");
        let used: u16 = tiny.shown.iter().map(|(_, w)| w).sum::<u16>() + SPACING;
        assert_eq!(used, 20, "and give up width (their cells end in …) rather than run off the screen");
        assert_eq!((tiny.shown[0].1, tiny.shown[1].1), (11, 8), "the widest gives first");
    }

    #[test]
    fn the_widths_fill_the_terminal() {
        let plan = plan(COLUMNS, &[8, 15, 16, 5, 40, 7], 80, false, 0);
        let used: u16 = plan.shown.iter().map(|(_, w)| w).sum::<u16>() + SPACING * (plan.shown.len() as u16 - 1);
        assert_eq!(used, 80);
    }

    #[test]
    fn wide_mode_shows_whole_columns_and_scrolls_by_column() {
        let natural = [8, 15, 16, 5, 40, 7];
        let all = plan(COLUMNS, &natural, 200, true, 0);
        assert_eq!(all.shown.len(), 6, "wide-only columns too");
        assert_eq!(all.shown[4], (4, 40), "every column at its full width");
        // 40 cells: the columns that fit whole, and how many more are to the right.
        let narrow = plan(COLUMNS, &natural, 40, true, 0);
        assert_eq!(narrow.shown, [(0, 9), (1, 15)], "PHASE (16) would not fit whole");
        assert_eq!((narrow.left, narrow.right), (0, 4));
        let scrolled = plan(COLUMNS, &natural, 40, true, 2);
        assert_eq!(scrolled.shown, [(2, 16), (3, 5)]);
        assert_eq!(scrolled.hidden, ["NAMESPACE", "NAME", "MESSAGE", "TENANTS"]);
        assert_eq!((scrolled.left, scrolled.right), (2, 2));
        // A column wider than the terminal is the only one shown, cut to the terminal (with `…`).
        let message = plan(COLUMNS, &natural, 30, true, 4);
        assert_eq!(message.shown, [(4, 30)]);
        let too_far = plan(COLUMNS, &natural, 40, true, 99);
        assert_eq!(too_far.shown, [(5, 7)], "the last column stays");
    }

    /// Issue 31: `w` at 80 columns made the table wider than the terminal, which clipped cells
    /// with no `…`. Whatever the width and scroll, the columns never need more than the terminal.
    #[test]
    fn no_plan_is_wider_than_the_terminal() {
        let natural = [8, 15, 16, 5, 40, 7];
        for width in 12..=120 {
            for (wide, offset) in [(false, 0), (true, 0), (true, 1), (true, 3), (true, 5)] {
                let plan = plan(COLUMNS, &natural, width, wide, offset);
                let used: u16 = plan.shown.iter().map(|(_, w)| w).sum::<u16>()
                    + SPACING * (plan.shown.len() as u16).saturating_sub(1);
                assert!(used <= width, "{width} cells, wide {wide}, offset {offset}: {used} used ({plan:?})");
            }
        }
    }

    /// Issue 31: at 120 columns the rollouts' VERSION (15 cells) was cut to `hr-por…` while the
    /// message took the rest. The message, the widest, gives up its tail first.
    #[test]
    fn the_widest_cells_give_way_first() {
        let rollouts = crate::console::views::columns(crate::console::app::ViewKind::Rollouts);
        // NAMESPACE BATCH DEPLOYMENT VERSION ACTION STATE PROGRESS MESSAGE, as in the demo.
        let natural = [9, 15, 26, 15, 9, 8, 14, 85];
        let plan = plan(rollouts, &natural, 120, false, 0);
        let widths: Vec<u16> = plan.shown.iter().map(|(_, w)| *w).collect();
        assert_eq!(widths, [9, 15, 26, 15, 9, 8, 14, 17], "only MESSAGE is cut");
    }

    #[test]
    fn cut_cells_end_in_an_ellipsis() {
        assert_eq!(fit(Line::raw("provisioning"), 8).to_string(), "provisi…");
        assert_eq!(fit(Line::raw("Ready"), 8).to_string(), "Ready");
        let bar = Line::from(vec![Span::raw("█████"), Span::raw("░░░░░"), Span::raw(" 3/5")]);
        assert_eq!(fit(bar, 7).to_string(), "█████░…", "cut across spans");
        assert_eq!(fit(Line::raw("x"), 0).to_string(), "");
    }
}
