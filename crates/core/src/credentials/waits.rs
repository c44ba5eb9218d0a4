//! How long a batch may wait for a change window or the end of a freeze, and what that does to its margin and verdict.

use super::*;

/// The margin when the batch starts at `start` instead of `earliest`, and what to say about the
/// wait with the verdict it gives: past the revocation the engine asks a person (unsafe) — or,
/// with `--on-deadline roll`, rolls at once (the margin as without the wait); windows that cannot
/// be read hold the batch (unsafe, no margin).
pub(super) fn waited(
    deadline_rolls: bool,
    start: &schedule::Start,
    earliest: Timestamp,
    revocation: Timestamp,
    rollout: i64,
) -> (Option<i64>, Option<(String, Verdict)>) {
    let margin_from =
        |start: Timestamp| revocation.as_second().saturating_sub(start.as_second().saturating_add(rollout));
    let Some(wait) = &start.wait else { return (Some(margin_from(earliest)), None) };
    let text = wait.text(start.at);
    match wait {
        schedule::Wait::Unreadable { .. } => (None, Some((text, Verdict::Unsafe))),
        _ if margin_from(start.at) >= 0 => (Some(margin_from(start.at)), Some((text, Verdict::Ok))),
        _ if deadline_rolls => (
            Some(margin_from(earliest)),
            Some((
                format!("{text} would outlive the old credentials: the engine rolls at once (--on-deadline roll)"),
                Verdict::Ok,
            )),
        ),
        _ => (
            Some(margin_from(start.at)),
            Some((
                format!(
                    "{text}, after the old credentials may be revoked: the engine asks a person ({}; approving \
                     rolls at once)",
                    wait.deadline_reason()
                ),
                Verdict::Unsafe,
            )),
        ),
    }
}

/// When the batch rolling this Secret starts, if it may from `earliest`: an open batch already
/// rolling or forced does not wait (force overrides windows and freezes); otherwise it waits as
/// the schedule says — the open batch's application, or (no batch yet) the consumer that would
/// wait longest.
pub(super) fn scheduled_start(
    inputs: &Inputs<'_>,
    schedule: &Schedule<'_>,
    report: &CredentialReport,
    open: Option<&RotationBatch>,
    earliest: Timestamp,
) -> schedule::Start {
    let start = |application: &str| schedule.start(inputs.applications, &report.namespace, application, earliest);
    match open {
        Some(batch) if batch.spec.force.is_some() || batch.phase() == crate::api::BatchPhase::RollingOut => {
            schedule::Start::at_once(earliest)
        }
        Some(batch) => start(&batch.spec.application),
        None => report
            .applications
            .iter()
            .map(|application| start(application))
            .max_by_key(|start| (matches!(start.wait, Some(schedule::Wait::Unreadable { .. })), start.at))
            .unwrap_or_else(|| schedule::Start::at_once(earliest)),
    }
}

/// No rotation under way: whether the next one, whenever it comes, may wait so long for a change
/// window or a freeze that less than a rollout is left of `margin` (TTL − window − rollout). It may
/// (it depends on when it comes), so at most at-risk; the reason says how long it may wait.
pub(super) fn next_rotation_wait(
    inputs: &Inputs<'_>,
    schedule: &Schedule<'_>,
    report: &CredentialReport,
    margin: i64,
) -> Option<(String, Verdict)> {
    if schedule.deadline_rolls {
        return None;
    }
    let (wait, what) = report
        .applications
        .iter()
        .filter_map(|application| {
            schedule.longest_wait(inputs.applications, &report.namespace, application, inputs.now, inputs.timing.window)
        })
        .max_by_key(|(wait, what)| (matches!(what, schedule::Wait::Unreadable { .. }), *wait))?;
    if let schedule::Wait::Unreadable { .. } = what {
        return Some((what.text(inputs.now), Verdict::AtRisk));
    }
    let left = margin.saturating_sub(wait);
    (left < seconds(inputs.timing.expected_rollout)).then(|| {
        let waits_for = match &what {
            schedule::Wait::Window { windows } => format!("a change window ({windows})"),
            schedule::Wait::Frozen { summary } => format!("the end of the freeze ({summary})"),
            schedule::Wait::Unreadable { message } => message.clone(),
        };
        (
            format!(
                "the next rotation's batch may wait up to {} for {waits_for}: that leaves {} beyond the window and \
                 the rollout, so the engine may have to ask a person ({})",
                human_signed(wait),
                human_signed(left),
                what.deadline_reason()
            ),
            Verdict::AtRisk,
        )
    })
}
