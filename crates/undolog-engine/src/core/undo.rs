//! Planning the saga that undoes a session.

use undolog_store::Effect;
use undolog_types::{EffectId, EffectState, Tier};

/// What undoing a session will do.
#[derive(Debug, Clone, PartialEq)]
pub struct UndoPlan {
    /// Effects to compensate, last completed first.
    pub steps: Vec<Effect>,
    /// Irreversible effects that ran: they cannot be undone and are reported.
    pub not_undoable: Vec<EffectId>,
}

/// Orders the compensations of a session: the undo stack from the top, skipping what is already
/// compensated; a step whose compensation failed before, or that was interrupted, is tried again.
pub fn plan_undo(undo_stack: &[EffectId], effects: &[Effect]) -> UndoPlan {
    let by_id = |id: &EffectId| effects.iter().find(|e| e.id == *id);
    let steps = undo_stack
        .iter()
        .rev()
        .filter_map(by_id)
        .filter(|e| {
            matches!(
                e.state,
                EffectState::Committed
                    | EffectState::Compensating
                    | EffectState::CompensationFailed
            )
        })
        .cloned()
        .collect();
    let not_undoable = effects
        .iter()
        .filter(|e| e.tier == Tier::Irreversible && e.state == EffectState::Committed)
        .map(|e| e.id)
        .collect();
    UndoPlan {
        steps,
        not_undoable,
    }
}
