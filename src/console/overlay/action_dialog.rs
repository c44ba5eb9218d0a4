//! The reason dialog of a batch action (`a`, `F`, `h`, `x`, `r`, `u`) and of a freeze (`Z`, `U`):
//! what the action does, what it touches, and a reason typed before Enter confirms (a freeze also
//! asks for how long, `4h` unless changed). Keys here are text: only Esc, Ctrl-C, Tab (approve
//! too, on force; the next field, on freeze) and Enter are the dialog's own.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui_textarea::{CursorMove, TextArea};

use super::super::strings;
use super::super::table;
use super::super::theme::Theme;
use super::super::user_write::{Confirmed, UserWrite};
use super::{Outcome, centered, popup_block};
use crate::actions::BatchAction;
use crate::api::BatchPhase;
use crate::readmodel::BatchRow;

/// What confirming the dialog does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DialogAction {
    /// An action on the batch `target`.
    Batch(BatchAction),
    /// Freeze the application `target` (for the length typed in the dialog).
    Freeze,
    /// Lift the freeze of the application `target`.
    Unfreeze,
}

impl DialogAction {
    /// `approve`, `freeze`, …: the heading's verb.
    pub fn verb(self) -> &'static str {
        match self {
            Self::Batch(action) => action.verb(),
            Self::Freeze => "freeze",
            Self::Unfreeze => "unfreeze",
        }
    }
}

/// The confirm dialog of a batch action or a freeze.
pub struct ActionDialog {
    pub action: DialogAction,
    /// The batch's phase when the dialog opened (`None` for a freeze).
    pub phase: Option<BatchPhase>,
    pub namespace: String,
    /// The batch, or for a freeze the application.
    pub target: String,
    /// One-line summary of the batch (phase, application, deployments) or the application.
    pub summary: String,
    pub reason: TextArea<'static>,
    /// For force on a batch that needs an approval: approve in the same write.
    pub approve_too: Option<bool>,
    /// For a freeze: how long (`4h`, `90m`), typed before the reason.
    pub lasts: Option<TextArea<'static>>,
    /// Keys go to `lasts` (Tab moves between it and the reason).
    pub editing_lasts: bool,
    /// Why Enter did not confirm (an empty reason, a length that is not one), shown in the dialog.
    pub error: Option<String>,
    /// What the action touches: the Deployments and the tenants they serve, or for a freeze the
    /// open batch and the freeze in force (a preview).
    pub preview: Vec<String>,
}

fn reason_field(placeholder: &str) -> TextArea<'static> {
    let mut reason = TextArea::default();
    reason.set_placeholder_text(placeholder);
    reason
}

impl ActionDialog {
    /// The dialog of `action` on the batch of `row`; `preview` says what it touches.
    pub fn new(action: BatchAction, row: &BatchRow, preview: Vec<String>) -> Self {
        let needs_approval = row.object.spec.approval.as_ref().is_some_and(|a| a.required && a.approved_by.is_none());
        Self {
            action: DialogAction::Batch(action),
            phase: Some(row.phase.clone()),
            summary: format!("{} · {} · {} · deployments {}", row.application, row.phase, row.approval, row.progress),
            namespace: row.namespace.clone(),
            target: row.name.clone(),
            reason: reason_field(strings::REASON_PLACEHOLDER),
            approve_too: matches!(action, BatchAction::Force { .. }).then_some(needs_approval),
            lasts: None,
            editing_lasts: false,
            error: None,
            preview,
        }
    }

    /// The dialog of freezing (or, `unfreeze`, of lifting the freeze of) the application
    /// `namespace/application`; `preview` says what it holds.
    pub fn freeze(unfreeze: bool, namespace: &str, application: &str, preview: Vec<String>) -> Self {
        let lasts = (!unfreeze).then(|| {
            let mut lasts = TextArea::new(vec![strings::FREEZE_DEFAULT.to_string()]);
            lasts.move_cursor(CursorMove::End);
            lasts
        });
        let mut dialog = Self {
            action: if unfreeze { DialogAction::Unfreeze } else { DialogAction::Freeze },
            phase: None,
            summary: format!("CAPApplication {namespace}/{application}"),
            namespace: namespace.to_string(),
            target: application.to_string(),
            reason: reason_field(strings::FREEZE_REASON_PLACEHOLDER),
            approve_too: None,
            lasts,
            editing_lasts: false,
            error: None,
            preview,
        };
        dialog.show_cursor();
        dialog
    }

    /// The field keys go to shows its cursor; the other does not.
    fn show_cursor(&mut self) {
        let cursor = Style::default().add_modifier(Modifier::REVERSED);
        let (on_lasts, on_reason) =
            if self.editing_lasts { (cursor, Style::default()) } else { (Style::default(), cursor) };
        self.reason.set_cursor_style(on_reason);
        if let Some(lasts) = self.lasts.as_mut() {
            lasts.set_cursor_style(on_lasts);
        }
    }

    pub fn handle_key(&mut self, key: &KeyEvent) -> Outcome {
        match key.code {
            KeyCode::Esc => Outcome::CloseInBurst,
            // Ctrl-C is never typed as part of a reason: no burst to swallow after it.
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Outcome::Close,
            KeyCode::Tab | KeyCode::BackTab => {
                if let Some(approve) = self.approve_too.as_mut() {
                    *approve = !*approve;
                } else if self.lasts.is_some() {
                    self.editing_lasts = !self.editing_lasts;
                    self.show_cursor();
                }
                Outcome::Stay
            }
            KeyCode::Enter => self.confirm(),
            _ if self.editing_lasts => {
                self.error = None;
                if let Some(lasts) = self.lasts.as_mut() {
                    lasts.input(*key);
                }
                Outcome::Stay
            }
            KeyCode::Char(_)
                if self.reason.lines().iter().map(|line| line.chars().count() + 1).sum::<usize>()
                    > crate::api::common::MAX_REASON =>
            {
                self.error = Some(format!(
                    "a reason may be at most {} characters: this one is full",
                    crate::api::common::MAX_REASON
                ));
                Outcome::Stay
            }
            _ => {
                self.error = None;
                self.reason.input(*key);
                Outcome::Stay
            }
        }
    }

    /// How long the freeze lasts, as typed: a positive Go duration (`4h`, `90m`, `2h30m`).
    fn lasts(&self) -> Option<Result<std::time::Duration, String>> {
        let text = self.lasts.as_ref()?.lines().join("").trim().to_string();
        Some(
            crate::api::go_duration::parse_go_duration(&text)
                .ok()
                .filter(|lasts| !lasts.is_zero())
                .ok_or_else(|| strings::freeze_duration_error(&text)),
        )
    }

    /// Enter: the action with its reason, or (an empty or invalid reason, a length that is not
    /// one) why not, in the dialog.
    fn confirm(&mut self) -> Outcome {
        let lasts = match self.lasts() {
            Some(Err(error)) => {
                self.error = Some(error);
                self.editing_lasts = true;
                self.show_cursor();
                return Outcome::Stay;
            }
            Some(Ok(lasts)) => Some(lasts),
            None => None,
        };
        let reason = self.reason.lines().join(" ").trim().to_string();
        if reason.is_empty() {
            self.error = Some(strings::REASON_REQUIRED.to_string());
            self.editing_lasts = false;
            self.show_cursor();
            return Outcome::Stay;
        }
        // The CLI's check (and the CRD's limit): too long or a control character stays here.
        let reason = match crate::api::common::check_reason(&reason) {
            Ok(reason) => reason,
            Err(error) => {
                self.error = Some(error);
                return Outcome::Stay;
            }
        };
        let (namespace, target) = (self.namespace.clone(), self.target.clone());
        let confirmed = match (self.action, lasts) {
            (DialogAction::Batch(action), _) => {
                let action = match action {
                    BatchAction::Force { .. } => BatchAction::Force { approve: self.approve_too.unwrap_or(false) },
                    action => action,
                };
                Confirmed::Write(UserWrite::Batch { namespace, batch: target, action, reason: Some(reason) })
            }
            (DialogAction::Freeze, Some(lasts)) => {
                Confirmed::FreezeFor { namespace, application: target, lasts, reason }
            }
            (DialogAction::Freeze, None) => return Outcome::Stay,
            (DialogAction::Unfreeze, _) => {
                Confirmed::Write(UserWrite::Unfreeze { namespace, application: target, reason })
            }
        };
        Outcome::Confirmed(confirmed)
    }

    pub fn key_hints(&self) -> String {
        match (self.approve_too, &self.lasts) {
            (Some(_), _) => format!("{} · {}", strings::DIALOG_HINT, strings::DIALOG_TOGGLE_HINT),
            (None, Some(_)) => strings::FREEZE_HINT.to_string(),
            (None, None) => strings::DIALOG_HINT.to_string(),
        }
    }

    /// The title and what confirming does.
    fn text(&self) -> (&'static str, &'static str) {
        match self.action {
            DialogAction::Batch(action) => {
                strings::dialog_text(action, self.phase.as_ref().unwrap_or(&BatchPhase::default()))
            }
            DialogAction::Freeze => strings::freeze_dialog_text(false),
            DialogAction::Unfreeze => strings::freeze_dialog_text(true),
        }
    }

    /// Over `area` (the whole screen).
    pub fn draw(&self, frame: &mut Frame, area: Rect, theme: &Theme) {
        let (title, explanation) = self.text();
        let popup = centered(area, 70, 0, 50, 17);
        frame.render_widget(Clear, popup);
        let block = popup_block(theme, title, self.key_hints());
        let inner = block.inner(popup);
        frame.render_widget(block, popup);
        // Restarts, tenants served, and (when known) the old credentials' deadline.
        let preview_height = u16::try_from(self.preview.len()).unwrap_or(u16::MAX);
        let [heading, summary, preview, explain, toggle, label, reason, error] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Length(preview_height),
            Constraint::Length(2),
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Min(1),
            Constraint::Length(1),
        ])
        .areas(inner);
        frame.render_widget(
            Paragraph::new(Line::from(vec![
                Span::styled(format!("{} ", self.action.verb()), theme.accent()),
                Span::raw(format!("{}/{}", self.namespace, self.target)),
            ])),
            heading,
        );
        frame.render_widget(
            Paragraph::new(table::fit(Line::raw(self.summary.clone()), summary.width)).style(theme.muted()),
            summary,
        );
        let preview_lines: Vec<Line> = self
            .preview
            .iter()
            .map(|line| {
                let fitted = table::fit(Line::raw(line.clone()), preview.width);
                if line.starts_with(strings::OLD_CREDENTIALS) { fitted.style(theme.warning()) } else { fitted }
            })
            .collect();
        frame.render_widget(Paragraph::new(preview_lines), preview);
        frame.render_widget(Paragraph::new(explanation).wrap(Wrap { trim: true }), explain);
        if let Some(why) = &self.error {
            frame.render_widget(Paragraph::new(why.as_str()).style(theme.error()), error);
        }
        if let Some(approve) = self.approve_too {
            let mark = if approve { "[x]" } else { "[ ]" };
            frame.render_widget(
                Paragraph::new(format!("{mark} also approve (the batch needs an approval)")).style(theme.warning()),
                toggle,
            );
        }
        if let Some(lasts) = &self.lasts {
            let label_width = u16::try_from(strings::FREEZE_FOR.len() + 1).unwrap_or(u16::MAX);
            let [label, field] =
                Layout::horizontal([Constraint::Length(label_width), Constraint::Min(1)]).areas(toggle);
            frame.render_widget(Paragraph::new(strings::FREEZE_FOR).style(theme.accent()), label);
            frame.render_widget(lasts, field);
        }
        frame.render_widget(Paragraph::new("Reason:").style(theme.accent()), label);
        let field = Block::default().borders(Borders::ALL).border_style(theme.border());
        let field_inner = field.inner(reason);
        frame.render_widget(field, reason);
        frame.render_widget(&self.reason, field_inner);
    }
}

#[cfg(test)]
mod tests {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    use super::DialogAction;
    use crate::actions::BatchAction;
    use crate::console::app::Level;
    use crate::console::overlay::Overlay;
    use crate::console::strings;
    use crate::console::update::testing::{app, ctrl, goto_batch, press, press_at, typed};
    use crate::console::update::{Command, Msg, update};
    use crate::console::user_write::UserWrite;
    use crate::demo::sample::{self, SampleObjects};

    #[test]
    fn a_opens_the_approve_dialog_and_enter_sends_the_reason() {
        let mut app = app();
        goto_batch(&mut app, "hr-portal-c9dsg");
        assert!(press(&mut app, KeyCode::Char('a')).is_empty());
        assert!(
            matches!(&app.overlay, Overlay::Dialog(d) if d.action == DialogAction::Batch(BatchAction::Approve) && d.approve_too.is_none())
        );
        // In the dialog, letters are text: 'q' does not quit, 'a' does not re-open.
        typed(&mut app, "  CHG-1 qa ");
        assert!(!app.quit);
        let commands = press(&mut app, KeyCode::Enter);
        assert_eq!(
            commands,
            vec![Command::Write(UserWrite::Batch {
                namespace: "cap-hr".into(),
                batch: "hr-portal-c9dsg".into(),
                action: BatchAction::Approve,
                reason: Some("CHG-1 qa".into()),
            })]
        );
        assert!(matches!(app.overlay, Overlay::None));
        assert!(app.flash.as_ref().is_some_and(|f| f.text.starts_with("approving cap-hr/hr-portal-c9dsg")));
        update(&mut app, Msg::WriteDone(Err("approve cap-hr/hr-portal-c9dsg: conflict".into())));
        assert!(app.flash.as_ref().is_some_and(|f| f.level == Level::Error));
    }

    #[test]
    fn esc_and_ctrl_c_cancel_a_dialog_without_a_write() {
        let mut app = app();
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('x'));
        assert!(matches!(&app.overlay, Overlay::Dialog(d) if d.action == DialogAction::Batch(BatchAction::Cancel)));
        assert!(press(&mut app, KeyCode::Esc).is_empty());
        assert!(matches!(app.overlay, Overlay::None));
        press(&mut app, KeyCode::Char('h'));
        assert!(matches!(&app.overlay, Overlay::Dialog(d) if d.action == DialogAction::Batch(BatchAction::Hold)));
        assert!(ctrl(&mut app, 'c').is_empty());
        assert!(matches!(app.overlay, Overlay::None));
        assert!(!app.quit);
    }

    #[test]
    fn enter_on_an_empty_reason_keeps_the_dialog_open_and_says_why() {
        let mut app = app();
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('h'));
        for blank in ["", "   "] {
            let _ = typed(&mut app, blank);
            assert!(press(&mut app, KeyCode::Enter).is_empty(), "{blank:?} sent a write");
            assert!(
                matches!(&app.overlay, Overlay::Dialog(d) if d.error.as_deref() == Some(strings::REASON_REQUIRED)),
                "the dialog stays open and says a reason is required"
            );
        }
        let commands = typed(&mut app, "freeze\n");
        assert!(
            matches!(&commands[..], [Command::Write(UserWrite::Batch { action: BatchAction::Hold, reason: Some(r), .. })] if r == "freeze")
        );
    }

    #[test]
    fn the_reason_dialog_stops_at_the_limit_and_says_so() {
        let mut app = app();
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('h'));
        let _ = typed(&mut app, &"x".repeat(crate::api::common::MAX_REASON + 5));
        assert!(
            matches!(&app.overlay, Overlay::Dialog(d) if d.error.as_deref().is_some_and(|e| e.contains("1024"))),
            "the dialog says the reason is full"
        );
        let commands = press(&mut app, KeyCode::Enter);
        assert!(
            matches!(&commands[..], [Command::Write(UserWrite::Batch { reason: Some(r), .. })] if r.chars().count() == crate::api::common::MAX_REASON),
            "the reason sent is cut at the limit"
        );
    }

    #[test]
    fn keys_typed_in_the_burst_that_closed_a_dialog_are_not_hotkeys() {
        let mut app = app();
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('h'));
        let _ = typed(&mut app, "CHG-42");
        let closed = std::time::Instant::now() + std::time::Duration::from_secs(3600);
        assert_eq!(press_at(&mut app, KeyCode::Enter, closed).len(), 1);
        let selected = app.cursor().selected;
        // The user types on at typing speed: G (bottom), d (detail), x (cancel dialog), a (approve).
        let mut at = closed;
        for key in ['G', 'd', 'x', 'a'] {
            at += std::time::Duration::from_millis(120);
            assert!(press_at(&mut app, KeyCode::Char(key), at).is_empty(), "{key} acted");
        }
        assert!(matches!(app.overlay, Overlay::None), "nothing opened");
        assert_eq!(app.cursor().selected, selected, "nothing moved");
        // After a pause keys are hotkeys again.
        at += std::time::Duration::from_secs(1);
        press_at(&mut app, KeyCode::Char('d'), at);
        assert!(matches!(app.overlay, Overlay::Detail(_)));
    }

    #[test]
    fn the_dialog_previews_the_deployments_and_tenants() {
        let mut app = app();
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('h'));
        let Overlay::Dialog(dialog) = &app.overlay else { panic!("no dialog") };
        assert_eq!(dialog.preview.len(), 2, "{:?}", dialog.preview);
        assert!(dialog.preview[0].starts_with("restarts"), "{:?}", dialog.preview);
        assert!(dialog.preview[1].starts_with("tenants served"), "{:?}", dialog.preview);
    }

    /// A batch that waits before its rollout shows the plan kept from the end of its window, and
    /// the tenants its versions serve: nobody approves blind.
    #[test]
    fn a_waiting_batch_previews_its_kept_plan() {
        use crate::api::rotation_batch::{BatchDeployment, DeploymentAction, PlannedRollout};
        let mut objects = SampleObjects::demo().expect("sample");
        let batch = objects.batch_mut("bookshop-4hx2p").expect("bookshop");
        let status = batch.status.get_or_insert_with(Default::default);
        status.phase = crate::api::BatchPhase::Waiting;
        status.deployments.clear();
        status.planned = Some(PlannedRollout {
            at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(crate::demo::sample::now()),
            deployments: vec![BatchDeployment {
                name: "bookshop-1-10-0-srv".into(),
                version: "bookshop-1-10-0".into(),
                workload: "srv".into(),
                action: DeploymentAction::Restart,
                ..Default::default()
            }],
            tenants: 2,
            taken_back: None,
        });
        let mut app = sample::app(objects.snapshot());
        goto_batch(&mut app, "bookshop-4hx2p");
        press(&mut app, KeyCode::Char('a'));
        let Overlay::Dialog(dialog) = &app.overlay else { panic!("no dialog") };
        assert!(
            dialog.preview[0].starts_with("restarts (planned)") && dialog.preview[0].contains("bookshop-1-10-0-srv"),
            "{:?}",
            dialog.preview
        );
        assert!(
            dialog.preview[1].starts_with("tenants served") && !dialog.preview[1].ends_with(" -"),
            "{:?}",
            dialog.preview
        );
    }

    #[test]
    fn shift_f_forces_and_tab_toggles_approving_too() {
        let mut objects = SampleObjects::demo().expect("sample");
        objects.batch_mut("bookshop-4hx2p").expect("bookshop").spec.approval =
            Some(crate::api::rotation_batch::Approval { required: true, ..Default::default() });
        let mut app = sample::app(objects.snapshot());
        goto_batch(&mut app, "bookshop-4hx2p");
        update(&mut app, Msg::Key(KeyEvent::new(KeyCode::Char('F'), KeyModifiers::SHIFT)));
        assert!(matches!(&app.overlay, Overlay::Dialog(d) if d.approve_too == Some(true)));
        press(&mut app, KeyCode::Tab);
        let commands = typed(&mut app, "hotfix\n");
        assert!(
            matches!(
                &commands[..],
                [Command::Write(UserWrite::Batch { action: BatchAction::Force { approve: false }, .. })]
            ),
            "{commands:?}"
        );
    }

    #[test]
    fn h_releases_a_held_batch() {
        let mut objects = SampleObjects::demo().expect("sample");
        objects.hold("travel-tdv6j", "bob", None).expect("travel");
        let mut app = sample::app(objects.snapshot());
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('h'));
        assert!(matches!(&app.overlay, Overlay::Dialog(d) if d.action == DialogAction::Batch(BatchAction::Release)));
    }

    /// `r` and `u` on a Failed batch open their dialogs, naming what each touches; elsewhere
    /// they say why not.
    #[test]
    fn r_retries_and_u_undoes_a_failed_batch() {
        use crate::api::rotation_batch::{BatchDeployment, DeploymentAction, DeploymentRolloutState};
        let mut objects = SampleObjects::demo().expect("sample");
        let batch = objects.batch_mut("travel-tdv6j").expect("travel");
        let status = batch.status.get_or_insert_with(Default::default);
        status.phase = crate::api::BatchPhase::Failed;
        status.deployments = vec![
            BatchDeployment {
                name: "travel-v3-srv".into(),
                action: DeploymentAction::Restart,
                state: Some(DeploymentRolloutState::Stalled),
                vcap_secret: Some("travel-v3-srv-new".into()),
                previous_vcap_secret: Some("travel-v3-srv-old".into()),
                ..BatchDeployment::default()
            },
            BatchDeployment {
                name: "travel-v3-router".into(),
                action: DeploymentAction::Restart,
                state: Some(DeploymentRolloutState::Complete),
                ..BatchDeployment::default()
            },
        ];
        let mut app = sample::app(objects.snapshot());
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('r'));
        let Overlay::Dialog(dialog) = &app.overlay else { panic!("no dialog: {:?}", app.flash) };
        assert_eq!(dialog.action, DialogAction::Batch(BatchAction::Retry));
        assert_eq!(dialog.preview[0], "restarts again (1): travel-v3-srv");
        press(&mut app, KeyCode::Esc);
        press(&mut app, KeyCode::Char('u'));
        let Overlay::Dialog(dialog) = &app.overlay else { panic!("no dialog: {:?}", app.flash) };
        assert_eq!(dialog.action, DialogAction::Batch(BatchAction::Undo));
        assert_eq!(dialog.preview[0], "goes back (1): travel-v3-srv");
        let commands = typed(&mut app, "new credentials break srv\n");
        assert!(
            matches!(&commands[..], [Command::Write(UserWrite::Batch { action: BatchAction::Undo, .. })]),
            "{commands:?}"
        );

        goto_batch(&mut app, "bookshop-9v9ps");
        assert!(press(&mut app, KeyCode::Char('u')).is_empty());
        let flash = app.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default();
        assert!(flash.contains("only a Failed batch or one the failure guard halted can be undone"), "{flash}");
    }
}

/// `Z` and `U`: the key, the dialog and the `Command` it sends (the write itself is the runtime's).
#[cfg(test)]
mod freeze_tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crossterm::event::KeyCode;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use super::DialogAction;
    use crate::console::app::{App, Level};
    use crate::console::overlay::Overlay;
    use crate::console::strings;
    use crate::console::update::testing::{app, goto_batch, press, typed};
    use crate::console::update::{Command, Msg, update};
    use crate::console::user_write::{Access, UserWrite, WriteKind};

    fn later(app: &App, lasts: Duration) -> Timestamp {
        app.now.checked_add(lasts).expect("time")
    }

    /// The applications view with `name` selected.
    fn on_application(name: &str) -> App {
        let mut app = app();
        typed(&mut app, &format!(":apps\n/^cap-\\S+ {name} \n"));
        assert_eq!(crate::console::queries::selected_application(&app).map(|a| a.name).as_deref(), Some(name));
        app
    }

    /// A freeze in force at the sample's moment, added to what the console shows.
    fn frozen(app: &mut App, name: &str, spec: serde_json::Value) {
        let mut object = json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
            "metadata": {"name": name, "namespace": "cap-shop"},
            "spec": {"scope": "Namespace", "until": "2026-11-21T18:00:00Z",
                     "frozen": {"by": "bob", "at": "2026-11-20T08:00:00Z", "reason": "release weekend"}}});
        if let (Some(target), Some(extra)) = (object["spec"].as_object_mut(), spec.as_object()) {
            target.extend(extra.clone());
        }
        Arc::make_mut(&mut app.snapshot).freezes.push(Arc::new(serde_json::from_value(object).expect("freeze")));
    }

    fn dialog(app: &App) -> &super::ActionDialog {
        match &app.overlay {
            Overlay::Dialog(dialog) => dialog,
            _ => panic!("no dialog; footer: {:?}", app.flash),
        }
    }

    #[test]
    fn shift_z_freezes_the_selected_application_for_4h_unless_told_otherwise() {
        let mut app = on_application("bookshop");
        assert!(press(&mut app, KeyCode::Char('Z')).is_empty());
        let opened = dialog(&app);
        assert_eq!((opened.action, opened.target.as_str()), (DialogAction::Freeze, "bookshop"));
        assert_eq!(opened.lasts.as_ref().map(|field| field.lines().join("")), Some("4h".to_string()));
        assert!(opened.preview[0].starts_with("open batch: bookshop-4hx2p ("), "{:?}", opened.preview);
        // Keys are text in the dialog: `q` does not quit.
        let commands = typed(&mut app, "release weekend q\n");
        assert_eq!(
            commands,
            vec![Command::Write(UserWrite::Freeze {
                namespace: "cap-shop".into(),
                application: "bookshop".into(),
                until: later(&app, Duration::from_secs(4 * 3600)),
                reason: "release weekend q".into(),
            })]
        );
        assert!(matches!(app.overlay, Overlay::None) && !app.quit);
        assert_eq!(app.flash.as_ref().map(|f| f.text.as_str()), Some("freezing cap-shop/bookshop…"));
        update(
            &mut app,
            Msg::WriteDone(Err(
                "freeze cap-shop/bookshop: you may not create freezes.capdeck.dev in namespace cap-shop".into(),
            )),
        );
        assert!(app.flash.as_ref().is_some_and(|f| f.level == Level::Error && f.text.contains("you may not create")));
    }

    /// Tab moves to the length; one that is not a duration keeps the dialog open and says so;
    /// an empty reason too.
    #[test]
    fn the_length_is_a_duration_and_the_reason_is_required() {
        let mut app = on_application("travel");
        press(&mut app, KeyCode::Char('Z'));
        press(&mut app, KeyCode::Tab);
        press(&mut app, KeyCode::Backspace);
        press(&mut app, KeyCode::Backspace);
        typed(&mut app, "soon");
        press(&mut app, KeyCode::Tab);
        assert!(typed(&mut app, "CAB freeze\n").is_empty(), "no write with a length that is none");
        assert_eq!(dialog(&app).error.as_deref(), Some(strings::freeze_duration_error("soon").as_str()));
        assert!(dialog(&app).editing_lasts, "the keys go back to the length");
        for _ in 0..4 {
            press(&mut app, KeyCode::Backspace);
        }
        typed(&mut app, "0s");
        assert!(press(&mut app, KeyCode::Enter).is_empty(), "a freeze of no time is none");
        press(&mut app, KeyCode::Backspace);
        press(&mut app, KeyCode::Backspace);
        typed(&mut app, "90m");
        let commands = press(&mut app, KeyCode::Enter);
        let expected = later(&app, Duration::from_secs(90 * 60));
        assert!(
            matches!(&commands[..], [Command::Write(UserWrite::Freeze { until, reason, .. })] if *until == expected && reason == "CAB freeze"),
            "{commands:?}"
        );

        press(&mut app, KeyCode::Char('Z'));
        assert!(press(&mut app, KeyCode::Enter).is_empty());
        assert_eq!(dialog(&app).error.as_deref(), Some(strings::REASON_REQUIRED));
    }

    /// On a batch row, `Z` freezes the batch's application.
    #[test]
    fn on_a_batch_the_key_freezes_its_application() {
        let mut app = app();
        goto_batch(&mut app, "hr-portal-c9dsg");
        press(&mut app, KeyCode::Char('Z'));
        assert_eq!((dialog(&app).namespace.as_str(), dialog(&app).target.as_str()), ("cap-hr", "hr-portal"));
        // Its old credentials die in 4 h: freezing past then escalates, so the dialog says when.
        assert!(
            dialog(&app).preview.iter().any(|line| line == "old credentials revocable in 3h59m"),
            "{:?}",
            dialog(&app).preview
        );
    }

    /// `U` lifts the application's own freeze; a namespace's freeze is not its to lift, and the
    /// key says which freeze holds it.
    #[test]
    fn shift_u_lifts_the_applications_own_freeze_only() {
        let mut app = on_application("bookshop");
        assert!(press(&mut app, KeyCode::Char('U')).is_empty());
        assert!(matches!(app.overlay, Overlay::None));
        assert_eq!(
            app.flash.as_ref().map(|f| f.text.as_str()),
            Some("unfreeze: CAPApplication cap-shop/bookshop is not frozen")
        );
        frozen(&mut app, "namespace", json!({}));
        press(&mut app, KeyCode::Char('U'));
        let flash = app.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default();
        assert!(
            flash.contains("no freeze of its own to lift; it is held by: namespace cap-shop frozen until"),
            "{flash}"
        );

        frozen(&mut app, "app-bookshop", json!({"scope": "Application", "application": "bookshop"}));
        press(&mut app, KeyCode::Char('U'));
        assert_eq!(dialog(&app).action, DialogAction::Unfreeze);
        assert!(dialog(&app).lasts.is_none(), "lifting asks for no length");
        assert!(dialog(&app).preview.iter().any(|line| line.starts_with("now: ")), "{:?}", dialog(&app).preview);
        assert_eq!(
            typed(&mut app, "done early\n"),
            vec![Command::Write(UserWrite::Unfreeze {
                namespace: "cap-shop".into(),
                application: "bookshop".into(),
                reason: "done early".into()
            })]
        );
    }

    /// Read-only, RBAC and a check still under way block the keys and say why; the answer to the
    /// check opens the dialog the key asked for.
    #[test]
    fn the_keys_say_why_they_are_blocked() {
        let mut app = on_application("bookshop");
        app.access.set(WriteKind::Freeze, "cap-shop", Access::Checking);
        assert!(press(&mut app, KeyCode::Char('Z')).is_empty());
        assert!(app.flash.as_ref().is_some_and(|f| f.text == format!("freeze: {}", strings::CHECKING_FREEZE_ACCESS)));
        update(&mut app, Msg::Access { kind: WriteKind::Freeze, namespace: "cap-shop".into(), allowed: true });
        assert_eq!(dialog(&app).action, DialogAction::Freeze, "the answer opens the dialog");
        press(&mut app, KeyCode::Esc);

        update(&mut app, Msg::Access { kind: WriteKind::Freeze, namespace: "cap-shop".into(), allowed: false });
        press(&mut app, KeyCode::Char('Z'));
        assert!(matches!(app.overlay, Overlay::None));
        let flash = app.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default();
        assert_eq!(flash, "freeze: alice may not create and update freezes (capdeck.dev) in namespace cap-shop");

        app.session.readonly = true;
        press(&mut app, KeyCode::Char('Z'));
        assert!(app.flash.as_ref().is_some_and(|f| f.text == format!("freeze: {}", strings::READONLY)));

        // Not on a row with an application.
        let mut tenants = self::app();
        typed(&mut tenants, ":tenants\n");
        press(&mut tenants, KeyCode::Char('Z'));
        assert!(
            tenants.flash.as_ref().is_some_and(|f| f.text == format!("freeze: {}", strings::SELECT_AN_APPLICATION))
        );
    }

    /// Moving onto an application in a namespace not asked about yet asks whether freezes may be
    /// written there, once.
    #[test]
    fn access_to_freezes_is_asked_once_per_namespace() {
        let mut app = app();
        app.access.clear();
        let commands = typed(&mut app, ":apps\nj");
        assert_eq!(
            commands.iter().filter(|c| matches!(c, Command::CheckAccess { kind: WriteKind::Freeze, .. })).count(),
            1,
            "{commands:?}"
        );
        let again = typed(&mut app, "jk");
        assert!(
            again.iter().all(|c| *c != Command::CheckAccess { kind: WriteKind::Freeze, namespace: "cap-hr".into() }),
            "{again:?}"
        );
    }
}
