//! Who approved is who approved: the conditions that say an attribution is not honoured, the
//! field managers whose writes are, and the check of the server's record (`managedFields`).
//! Pure, over a RotationBatch: the engine decides with it, the user's actions use it to replace a
//! refused value.

use kube::ResourceExt;

use super::RotationBatch;
use crate::api::common::bounded;

/// `spec.approval.approvedBy` was not written by `capdeck approve` (or the console).
pub const APPROVAL_HONOURED: &str = "ApprovalHonoured";
/// `spec.hold.by` was not written by `capdeck hold` (or the console).
pub const HOLD_HONOURED: &str = "HoldHonoured";
/// The reason of the `ApprovalHonoured` condition and of its Warning Event.
pub const APPROVAL_NOT_HONOURED: &str = "ApprovalNotHonoured";
/// The reason of the `HoldHonoured` condition and of its Warning Event.
pub const HOLD_NOT_HONOURED: &str = "HoldNotHonoured";

/// The field manager of the user's batch actions (`capdeck approve`, `hold`, …, and the console).
pub const ACTIONS_FIELD_MANAGER: &str = "capdeck-console";
/// The engine's field manager.
pub const ENGINE_FIELD_MANAGER: &str = "capdeck-engine";
/// The notifier's records in the status (never an attribution, named here with its siblings).
pub const NOTIFIER_FIELD_MANAGER: &str = "capdeck-notify";

/// An attribution in the spec that drives the engine: who approved, who held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attributed {
    /// `spec.approval.approvedBy`
    Approval,
    /// `spec.hold.by`
    Hold,
}

impl Attributed {
    pub const ALL: [Attributed; 2] = [Attributed::Approval, Attributed::Hold];

    /// The field's path below `spec`.
    pub fn path(self) -> [&'static str; 2] {
        match self {
            Self::Approval => ["approval", "approvedBy"],
            Self::Hold => ["hold", "by"],
        }
    }

    pub fn by(self, batch: &RotationBatch) -> Option<&str> {
        match self {
            Self::Approval => batch.spec.approval.as_ref().and_then(|a| a.approved_by.as_deref()),
            Self::Hold => batch.spec.hold.as_ref().map(|hold| hold.by.as_str()),
        }
    }

    /// The condition that says the engine does not honour it.
    pub fn condition_type(self) -> &'static str {
        match self {
            Self::Approval => APPROVAL_HONOURED,
            Self::Hold => HOLD_HONOURED,
        }
    }

    /// Field managers whose write of this attribution the engine takes: capdeck's actions
    /// (`capdeck approve`/`hold`, the console) — and for a hold the engine itself, which carries
    /// the hold of a superseded batch into the batch that replaces it.
    pub fn trusted(self, manager: &str) -> bool {
        manager == ACTIONS_FIELD_MANAGER || (self == Self::Hold && manager == ENGINE_FIELD_MANAGER)
    }

    /// The reason of that condition and of the Warning Event that says it.
    pub fn refusal_reason(self) -> &'static str {
        match self {
            Self::Approval => APPROVAL_NOT_HONOURED,
            Self::Hold => HOLD_NOT_HONOURED,
        }
    }

    pub fn noun(self) -> &'static str {
        match self {
            Self::Approval => "approval",
            Self::Hold => "hold",
        }
    }

    pub fn verb(self) -> &'static str {
        match self {
            Self::Approval => "approve",
            Self::Hold => "hold",
        }
    }
}

/// Whether the engine honours an attribution in the batch's spec: only when the API server's
/// record (`metadata.managedFields`) says capdeck's own field manager wrote the field, so an
/// approval or a hold written with `kubectl patch`/`edit`/`apply` — whatever name it carries —
/// never drives the engine. `Ok` also when the field is not set. `Err`: why not, and the fix.
///
/// The manager name is chosen by the client (`--field-manager`): this stops casual forgery and
/// says so on the batch; the ValidatingAdmissionPolicy of `capdeck manifests` is the enforcement.
pub fn attribution_check(batch: &RotationBatch, field: Attributed) -> Result<(), String> {
    let Some(by) = field.by(batch) else { return Ok(()) };
    let by = bounded(by, crate::api::common::MAX_USER);
    let (noun, verb) = (field.noun(), field.verb());
    let target = format!("{}/{}", batch.namespace().unwrap_or_default(), batch.name_any());
    let fix = format!("{verb} with capdeck {verb} {target}");
    let refused = |why: String| Err(format!("{noun} by {by} {why}: not honoured; {fix}"));
    let [object, leaf] = field.path();
    let owners: Vec<&str> = batch
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|entry| {
            entry.fields_v1.as_ref().is_some_and(|fields| {
                fields
                    .0
                    .get("f:spec")
                    .and_then(|spec| spec.get(format!("f:{object}")))
                    .and_then(|o| o.get(format!("f:{leaf}")))
                    .is_some()
            })
        })
        .map(|entry| entry.manager.as_deref().unwrap_or_default())
        .collect();
    if owners.is_empty() {
        return refused(format!("has no writer in the batch's managedFields (spec.{object}.{leaf})"));
    }
    // Several managers own a field only when each applied (server-side) the same value: one of
    // them being capdeck means capdeck wrote this value and nobody changed it since.
    if owners.iter().any(|manager| field.trusted(manager)) {
        return Ok(());
    }
    match owners.first() {
        None => Ok(()),
        Some(manager) => {
            let manager =
                if manager.is_empty() { "a client without a field manager".into() } else { bounded(manager, 128) };
            refused(format!("was written by {manager}, not by capdeck {verb}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    use crate::api::rotation_batch::testing::recorded;

    const NOW: &str = "2026-11-23T12:00:00Z";

    /// What the server's record of an attribution's writer makes of it: honoured only when
    /// capdeck's field manager wrote it.
    #[test]
    fn an_attribution_is_honoured_only_when_capdeck_wrote_it() {
        let approval = json!({"approval": {"required": true, "approvedBy": "ceo@example.com", "reason": "forged"}});
        let hold = json!({"hold": {"by": "ceo@example.com", "at": NOW}});
        let approved_by = json!({"f:approval": {".": {}, "f:approvedBy": {}, "f:approvedAt": {}, "f:reason": {}}});
        let required_only = json!({"f:approval": {".": {}, "f:required": {}}});
        let held_by = json!({"f:hold": {".": {}, "f:by": {}, "f:at": {}}});
        let forged_approval = "approval by ceo@example.com was written by kubectl-patch, not by capdeck approve: not \
                               honoured; approve with capdeck approve ns/b";
        let no_writer = "approval by ceo@example.com has no writer in the batch's managedFields \
                         (spec.approval.approvedBy): not honoured; approve with capdeck approve ns/b";
        type Case<'a> = (&'a str, Value, Option<Vec<(&'a str, Value)>>, Attributed, Result<(), &'a str>);
        let cases: Vec<Case> = vec![
            (
                "capdeck approve",
                approval.clone(),
                Some(vec![("capdeck-console", approved_by.clone())]),
                Attributed::Approval,
                Ok(()),
            ),
            (
                "kubectl patch",
                approval.clone(),
                Some(vec![("kubectl-patch", approved_by.clone())]),
                Attributed::Approval,
                Err(forged_approval),
            ),
            (
                "kubectl edit, beside the engine's requirement",
                approval.clone(),
                Some(vec![("capdeck-engine", required_only.clone()), ("kubectl-edit", approved_by.clone())]),
                Attributed::Approval,
                Err("approval by ceo@example.com was written by kubectl-edit, not by capdeck approve: not honoured; \
                     approve with capdeck approve ns/b"),
            ),
            (
                "the engine never approves",
                approval.clone(),
                Some(vec![("capdeck-engine", approved_by.clone())]),
                Attributed::Approval,
                Err("approval by ceo@example.com was written by capdeck-engine, not by capdeck approve: not \
                     honoured; approve with capdeck approve ns/b"),
            ),
            (
                "a client that named no manager",
                approval.clone(),
                Some(vec![("", approved_by.clone())]),
                Attributed::Approval,
                Err("approval by ceo@example.com was written by a client without a field manager, not by capdeck \
                     approve: not honoured; approve with capdeck approve ns/b"),
            ),
            (
                "the same value applied server-side by capdeck and kubectl: capdeck wrote it",
                approval.clone(),
                Some(vec![("kubectl", approved_by.clone()), ("capdeck-console", approved_by.clone())]),
                Attributed::Approval,
                Ok(()),
            ),
            ("managedFields stripped ([{}])", approval.clone(), None, Attributed::Approval, Err(no_writer)),
            (
                "nobody owns approvedBy",
                approval.clone(),
                Some(vec![("capdeck-console", required_only.clone())]),
                Attributed::Approval,
                Err(no_writer),
            ),
            ("no approval", json!({}), Some(vec![]), Attributed::Approval, Ok(())),
            ("capdeck hold", hold.clone(), Some(vec![("capdeck-console", held_by.clone())]), Attributed::Hold, Ok(())),
            (
                "a hold the engine carried into the batch that superseded the held one",
                hold.clone(),
                Some(vec![("capdeck-engine", held_by.clone())]),
                Attributed::Hold,
                Ok(()),
            ),
            (
                "kubectl patch of a hold",
                hold.clone(),
                Some(vec![("capdeck-console", approved_by.clone()), ("kubectl-patch", held_by.clone())]),
                Attributed::Hold,
                Err("hold by ceo@example.com was written by kubectl-patch, not by capdeck hold: not honoured; hold \
                     with capdeck hold ns/b"),
            ),
            ("no hold", approval.clone(), None, Attributed::Hold, Ok(())),
        ];
        let mut failures = Vec::new();
        for (case, spec, managed, field, expected) in cases {
            let batch = recorded(spec, managed.as_deref());
            let got = attribution_check(&batch, field);
            if got.as_ref().map(|_| ()).map_err(String::as_str) != expected {
                failures.push(format!("{case}: expected {expected:?}, got {got:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
