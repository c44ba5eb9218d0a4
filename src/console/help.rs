//! The help pane's text, generated from the key map and the command list (drawn by `draw`,
//! measured by `update` to keep its scroll inside the text).

use ratatui::text::{Line, Span};

use super::app::App;
use super::keymap::Action;
use super::queries::write_blocked;
use super::strings;

/// Help, generated from the key map and the command list.
pub fn lines(app: &App) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let mut lines = vec![Line::from(Span::styled("Keys", theme.accent()))];
    for action in Action::ALL {
        let keys = app.keymap.label(*action);
        if keys.is_empty() {
            continue;
        }
        let mut spans =
            vec![Span::styled(format!("  {keys:<14}"), theme.accent()), Span::raw(strings::action_help(*action))];
        if action.writes()
            && let Some(why) = write_blocked(app, *action)
        {
            spans.push(Span::styled(format!("  (disabled: {why})"), theme.muted()));
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::raw(""));
    lines.push(Line::from(Span::styled("Commands", theme.accent())));
    for (command, what) in strings::COMMANDS_HELP {
        lines.push(Line::from(vec![Span::styled(format!("  {command:<32}"), theme.accent()), Span::raw(*what)]));
    }
    lines.push(Line::raw(""));
    lines.push(Line::from(Span::styled("Session", theme.accent())));
    lines.push(Line::raw(format!(
        "  context {} · {} · engine {}",
        app.session.context,
        app.session.scope,
        app.role_label()
    )));
    lines.push(Line::raw(format!("  theme {} (themes: {})", app.theme.name, app.theme_names.join(", "))));
    if let Some(kubeconfig) = &app.session.demo_kubeconfig {
        lines.push(Line::raw(""));
        lines.push(Line::from(Span::styled("Demo", theme.accent())));
        lines.push(Line::raw("  the sandbox cluster is also reachable with kubectl:"));
        lines.push(Line::raw(format!("  KUBECONFIG={kubeconfig} kubectl get ca,cav,cat,rb -A")));
    }
    lines
}
