//! The reason dialog of a batch action (`a`, `F`, `h`, `x`, `r`, `u`): what the action does,
//! what it touches, and a reason typed before Enter confirms. Keys here are text: only Esc,
//! Ctrl-C, Tab (approve too, on force) and Enter are the dialog's own.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui_textarea::TextArea;

use super::super::strings;
use super::super::table;
use super::super::theme::Theme;
use super::{Outcome, centered, popup_block};
use crate::actions::BatchAction;
use crate::readmodel::BatchRow;

/// The confirm dialog of a batch action.
pub struct ActionDialog {
    pub action: BatchAction,
    /// The batch's phase when the dialog opened.
    pub phase: crate::api::BatchPhase,
    pub namespace: String,
    pub batch: String,
    /// One-line summary of the batch (phase, application, deployments).
    pub summary: String,
    pub reason: TextArea<'static>,
    /// For force on a batch that needs an approval: approve in the same write.
    pub approve_too: Option<bool>,
    /// Why Enter did not confirm (an empty reason), shown in the dialog.
    pub error: Option<String>,
    /// The Deployments the action will restart and the tenants they serve (a preview).
    pub preview: Vec<String>,
}

impl ActionDialog {
    /// The dialog of `action` on the batch of `row`; `preview` says what it touches.
    pub fn new(action: BatchAction, row: &BatchRow, preview: Vec<String>) -> Self {
        let needs_approval = row.object.spec.approval.as_ref().is_some_and(|a| a.required && a.approved_by.is_none());
        let mut reason = TextArea::default();
        reason.set_placeholder_text(strings::REASON_PLACEHOLDER);
        Self {
            action,
            phase: row.phase.clone(),
            summary: format!("{} · {} · {} · deployments {}", row.application, row.phase, row.approval, row.progress),
            namespace: row.namespace.clone(),
            batch: row.name.clone(),
            reason,
            approve_too: matches!(action, BatchAction::Force { .. }).then_some(needs_approval),
            error: None,
            preview,
        }
    }

    pub fn handle_key(&mut self, key: &KeyEvent) -> Outcome {
        match key.code {
            KeyCode::Esc => Outcome::CloseInBurst,
            // Ctrl-C is never typed as part of a reason: no burst to swallow after it.
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Outcome::Close,
            KeyCode::Tab => {
                if let Some(approve) = self.approve_too.as_mut() {
                    *approve = !*approve;
                }
                Outcome::Stay
            }
            KeyCode::Enter => self.confirm(),
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

    /// Enter: the action with its reason, or (an empty or invalid reason) why not, in the dialog.
    fn confirm(&mut self) -> Outcome {
        let reason = self.reason.lines().join(" ").trim().to_string();
        if reason.is_empty() {
            self.error = Some(strings::REASON_REQUIRED.to_string());
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
        let action = match self.action {
            BatchAction::Force { .. } => BatchAction::Force { approve: self.approve_too.unwrap_or(false) },
            other => other,
        };
        Outcome::Act { namespace: self.namespace.clone(), batch: self.batch.clone(), action, reason }
    }

    pub fn key_hints(&self) -> String {
        match self.approve_too {
            Some(_) => format!("{} · {}", strings::DIALOG_HINT, strings::DIALOG_TOGGLE_HINT),
            None => strings::DIALOG_HINT.to_string(),
        }
    }

    /// Over `area` (the whole screen).
    pub fn draw(&self, frame: &mut Frame, area: Rect, theme: &Theme) {
        let (title, explanation) = strings::dialog_text(self.action, &self.phase);
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
                Span::raw(format!("{}/{}", self.namespace, self.batch)),
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

    use crate::actions::BatchAction;
    use crate::console::app::Level;
    use crate::console::overlay::Overlay;
    use crate::console::strings;
    use crate::console::update::testing::{app, ctrl, goto_batch, press, press_at, typed};
    use crate::console::update::{Command, Msg, update};
    use crate::demo::sample::{self, SampleObjects};

    #[test]
    fn a_opens_the_approve_dialog_and_enter_sends_the_reason() {
        let mut app = app();
        goto_batch(&mut app, "hr-portal-c9dsg");
        assert!(press(&mut app, KeyCode::Char('a')).is_empty());
        assert!(
            matches!(&app.overlay, Overlay::Dialog(d) if d.action == BatchAction::Approve && d.approve_too.is_none())
        );
        // In the dialog, letters are text: 'q' does not quit, 'a' does not re-open.
        typed(&mut app, "  CHG-1 qa ");
        assert!(!app.quit);
        let commands = press(&mut app, KeyCode::Enter);
        assert_eq!(
            commands,
            vec![Command::Act {
                namespace: "cap-hr".into(),
                batch: "hr-portal-c9dsg".into(),
                action: BatchAction::Approve,
                reason: Some("CHG-1 qa".into()),
            }]
        );
        assert!(matches!(app.overlay, Overlay::None));
        assert!(app.flash.as_ref().is_some_and(|f| f.text.starts_with("approving cap-hr/hr-portal-c9dsg")));
        update(&mut app, Msg::ActionDone(Err("approve cap-hr/hr-portal-c9dsg: conflict".into())));
        assert!(app.flash.as_ref().is_some_and(|f| f.level == Level::Error));
    }

    #[test]
    fn esc_and_ctrl_c_cancel_a_dialog_without_a_write() {
        let mut app = app();
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('x'));
        assert!(matches!(&app.overlay, Overlay::Dialog(d) if d.action == BatchAction::Cancel));
        assert!(press(&mut app, KeyCode::Esc).is_empty());
        assert!(matches!(app.overlay, Overlay::None));
        press(&mut app, KeyCode::Char('h'));
        assert!(matches!(&app.overlay, Overlay::Dialog(d) if d.action == BatchAction::Hold));
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
            matches!(&commands[..], [Command::Act { action: BatchAction::Hold, reason: Some(r), .. }] if r == "freeze")
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
            matches!(&commands[..], [Command::Act { reason: Some(r), .. }] if r.chars().count() == crate::api::common::MAX_REASON),
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
            matches!(&commands[..], [Command::Act { action: BatchAction::Force { approve: false }, .. }]),
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
        assert!(matches!(&app.overlay, Overlay::Dialog(d) if d.action == BatchAction::Release));
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
        assert_eq!(dialog.action, BatchAction::Retry);
        assert_eq!(dialog.preview[0], "restarts again (1): travel-v3-srv");
        press(&mut app, KeyCode::Esc);
        press(&mut app, KeyCode::Char('u'));
        let Overlay::Dialog(dialog) = &app.overlay else { panic!("no dialog: {:?}", app.flash) };
        assert_eq!(dialog.action, BatchAction::Undo);
        assert_eq!(dialog.preview[0], "goes back (1): travel-v3-srv");
        let commands = typed(&mut app, "new credentials break srv\n");
        assert!(matches!(&commands[..], [Command::Act { action: BatchAction::Undo, .. }]), "{commands:?}");

        goto_batch(&mut app, "bookshop-9v9ps");
        assert!(press(&mut app, KeyCode::Char('u')).is_empty());
        let flash = app.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default();
        assert!(flash.contains("only a Failed batch or one the failure guard halted can be undone"), "{flash}");
    }
}
