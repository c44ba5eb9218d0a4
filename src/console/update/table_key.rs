//! A key on the table itself (no dialog, line or overlay took it): moving, views, panes, sorting.

use super::*;

/// What a non-writing key does on the table; then whether the selection may be written to is
/// asked (once per namespace).
pub(super) fn table_key(app: &mut App, action: Action) -> Vec<Command> {
    match action {
        Action::Up => set_selected(app, app.cursor().selected.saturating_sub(1)),
        Action::Down => set_selected(app, (app.cursor().selected + 1).min(app.visible.len().saturating_sub(1))),
        Action::Top => set_selected(app, 0),
        Action::Bottom => set_selected(app, app.visible.len().saturating_sub(1)),
        Action::PageUp => set_selected(app, app.cursor().selected.saturating_sub(queries::table_rows(app))),
        Action::PageDown => {
            let page = queries::table_rows(app);
            set_selected(app, (app.cursor().selected + page).min(app.visible.len().saturating_sub(1)))
        }
        Action::Enter => return drill_down(app),
        Action::Back => {
            if !app.filter.is_empty() {
                app.filter.clear();
                refresh(app);
            } else if let Some(previous) = app.back.pop() {
                app.route = previous;
                refresh(app);
            }
        }
        Action::NextView | Action::PreviousView => {
            let views = ViewKind::ALL;
            let current = views.iter().position(|v| *v == app.route.view).unwrap_or(0);
            let next = if action == Action::NextView {
                (current + 1) % views.len()
            } else {
                (current + views.len() - 1) % views.len()
            };
            let route = Route { view: views[next], focus: app.route.focus.clone() };
            navigate(app, route, false);
            return watch_fleet_if_shown(app).into_iter().collect();
        }
        Action::Filter => app.input = Input::Filter(app.filter.clone()),
        Action::Command => app.input = Input::Command(String::new()),
        Action::Help => app.overlay = Overlay::Help(HelpPane::default()),
        Action::Detail => return open_detail(app),
        Action::Yaml => match details::yaml(app) {
            Some(Ok((title, lines))) => app.overlay = Overlay::Yaml(TextPane::new(title, lines)),
            Some(Err(error)) => flash(app, Level::Error, error),
            None => flash(app, Level::Info, strings::NO_YAML.to_string()),
        },
        Action::Quit => {
            app.quit = true;
            return vec![Command::Quit];
        }
        Action::Wide => {
            app.wide = !app.wide;
            app.column_offset = 0;
        }
        Action::ScrollLeft => app.column_offset = app.column_offset.saturating_sub(1),
        Action::ScrollRight => {
            if !app.wide {
                app.wide = true;
            }
            let columns = crate::console::views::columns(app.route.view).len();
            app.column_offset = (app.column_offset + 1).min(columns.saturating_sub(1));
        }
        Action::Sort => {
            let columns = view(app.route.view).columns().len();
            set_sort(app, Sort::next(app.sorts.get(&app.route.view).copied(), columns));
        }
        Action::SortReverse => set_sort(app, Some(Sort::reversed(app.sorts.get(&app.route.view).copied()))),
        Action::Logs => flash(app, Level::Info, strings::LOGS_WHERE.to_string()),
        Action::Approve
        | Action::Force
        | Action::Hold
        | Action::Cancel
        | Action::Retry
        | Action::Undo
        | Action::Freeze
        | Action::Unfreeze => {}
    }
    check_access_for_selection(app)
}
