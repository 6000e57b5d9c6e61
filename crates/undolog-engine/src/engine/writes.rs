//! Carrying out the core's writes in a transaction, and the events they make.

use super::*;

impl Engine {
    /// Applies writes, commits, and tells the world.
    pub(crate) async fn commit_writes(
        &self,
        mut tx: Box<dyn Tx>,
        writes: &[Write],
    ) -> Result<(), Error> {
        let events = self.apply(&mut *tx, writes).await?;
        tx.commit().await?;
        self.published(events);
        Ok(())
    }

    /// Carries out the core's writes and names the events they make.
    pub(crate) async fn apply(
        &self,
        tx: &mut dyn Tx,
        writes: &[Write],
    ) -> Result<Vec<Event>, Error> {
        self.apply_expecting(tx, writes, Expected::default()).await
    }

    /// [`Engine::apply`], writing over the rows in `expected` only while they are as remembered.
    pub(crate) async fn apply_expecting(
        &self,
        tx: &mut dyn Tx,
        writes: &[Write],
        expected: Expected<'_>,
    ) -> Result<Vec<Event>, Error> {
        if let Some(memory) = &self.inner.remembered {
            memory.wrote(writes);
        }
        let mut events = Vec::new();
        for write in writes {
            match write {
                Write::PutSession(s) if expected.held.is_some_and(|held| held.contains(&s.id)) => {}
                Write::PutSession(s) => {
                    let before = expected.sessions.iter().find(|b| b.id == s.id);
                    write_session(tx, before, s).await?
                }
                Write::InsertEffect(e) => {
                    tx.insert_effect(e).await?;
                    events.push(Event::EffectIntercepted {
                        org: e.org.clone(),
                        session: e.session.clone(),
                        effect_id: e.id,
                        tool: e.tool.clone(),
                        tier: e.tier,
                    });
                    // Recorded finished (a refusal, a read-only call after it ran).
                    let (org, session, effect_id) = (e.org.clone(), e.session.clone(), e.id);
                    let error = || e.error.clone().unwrap_or_default();
                    match e.state {
                        EffectState::Rejected => events.push(Event::EffectRejected {
                            org,
                            session,
                            effect_id,
                            reason: error(),
                        }),
                        EffectState::Committed => events.push(Event::EffectCommitted {
                            org,
                            session,
                            effect_id,
                        }),
                        EffectState::Failed => events.push(Event::EffectFailed {
                            org,
                            session,
                            effect_id,
                            error: error(),
                        }),
                        _ => {}
                    }
                }
                Write::UpdateEffect(e) => {
                    match expected.effects.iter().find(|b| b.id == e.id) {
                        Some(before) => tx.replace_effect(before, e).await?,
                        None => tx.update_effect(e).await?,
                    }
                    let (org, session, effect_id) = (e.org.clone(), e.session.clone(), e.id);
                    match e.state {
                        EffectState::Committed => {
                            events.push(Event::EffectCommitted {
                                org,
                                session,
                                effect_id,
                            });
                        }
                        EffectState::Failed => {
                            let error = e.error.clone().unwrap_or_default();
                            events.push(Event::EffectFailed {
                                org,
                                session,
                                effect_id,
                                error,
                            });
                        }
                        EffectState::Rejected => {
                            let reason = e.error.clone().unwrap_or_default();
                            events.push(Event::EffectRejected {
                                org,
                                session,
                                effect_id,
                                reason,
                            });
                        }
                        _ => {}
                    }
                }
                Write::InsertApproval(a) => {
                    tx.insert_approval(a).await?;
                    // The held call is among the same writes.
                    let held = writes.iter().find_map(|w| match w {
                        Write::InsertEffect(e) | Write::UpdateEffect(e) if e.id == a.effect => {
                            Some(e)
                        }
                        _ => None,
                    });
                    events.push(Event::ApprovalRequired {
                        org: a.org.clone(),
                        session: a.session.clone(),
                        effect_id: a.effect,
                        approval_id: a.id,
                        tool: held.map(|e| e.tool.clone()).unwrap_or_default(),
                        arguments: held.map(|e| e.args.clone().into()).unwrap_or_default(),
                        tier: held.map_or(Tier::Irreversible, |e| e.tier),
                        reason: crate::events::hold_reason(held.map(|e| e.tier)).to_owned(),
                    });
                }
                Write::UpdateApproval(a) => {
                    tx.update_approval(a).await?;
                    events.push(Event::ApprovalDecided {
                        org: a.org.clone(),
                        session: a.session.clone(),
                        approval_id: a.id,
                        approved: a.state == undolog_types::ApprovalState::Approved,
                    });
                }
                Write::PushUndo {
                    session,
                    effect,
                    at,
                } => tx.push_undo(session, *effect, *at).await?,
            }
        }
        Ok(events)
    }
}
