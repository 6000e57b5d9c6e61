//! A batch's operations decided on the rows this engine remembers, without reading first.

use super::*;

impl Engine {
    /// Carries out an intercept or a read-only record in a session this engine remembers,
    /// without reading first (see `remembered`): decided on the session as remembered and on the
    /// assumption that the call is new, written only if both still hold. `true` when it is done
    /// and answered (an error of the store included); `false` when it must run the ordinary way:
    /// the session is not remembered or takes no calls, the call is known to have an earlier
    /// effect, the core would not simply record it, or the store found the memory out of date
    /// (and wrote nothing). A read-only record is answered once written, before the commit, as
    /// in a batch (see [`Op::answers_before_commit`]).
    pub(super) async fn run_remembered(&self, op: &mut Op) -> bool {
        let Some(memory) = &self.inner().remembered else {
            return false;
        };
        let (call, lookup) = match &*op {
            Op::Intercept { call, target, .. } => (&**call, target.lookup.as_ref()),
            Op::Record { record, .. } => (&record.call, None),
            Op::Update(_) => return false,
        };
        let Some(session) = memory.session(&call.org, &call.session) else {
            return false;
        };
        if session.state != SessionState::Active
            || lookup.is_some_and(|lookup| memory.finds(&call.org, lookup))
        {
            return false;
        }
        let Some((answer, writes)) = self.decide_remembered(op, &session) else {
            return false;
        };
        let mut answer = Some(answer);
        let done: Result<Vec<Event>, Error> = async {
            let mut tx = self.begin_for(op.org(), std::slice::from_ref(op)).await?;
            if let Op::Intercept { target, .. } = &*op {
                tx.lock(target.lock).await?;
                if let Some(lookup) = &target.lookup {
                    tx.expect_no_effect(lookup.borrowed()).await?;
                }
            }
            let expected = Expected {
                sessions: std::slice::from_ref(&session),
                effects: &[],
                held: None,
            };
            let events = self.apply_expecting(&mut *tx, &writes, expected).await?;
            if op.answers_before_commit()
                && let Some(answer) = answer.take()
            {
                self.answer(op, Ok(answer));
            }
            tx.commit().await?;
            Ok(events)
        }
        .await;
        match done {
            Ok(events) => {
                self.published(events);
                if let Some(answer) = answer {
                    self.answer(op, Ok(answer));
                }
                true
            }
            // The session changed, or the call has an earlier effect: either way the next
            // operation of the session, and this call again, are read first.
            Err(e) if e.is_changed() => {
                self.forget_rows_of(std::slice::from_ref(op));
                if let Op::Intercept { call, target, .. } = &*op
                    && let Some(lookup) = &target.lookup
                {
                    memory.found(&call.org, lookup);
                }
                false
            }
            Err(e) => {
                if answer.is_none() {
                    tracing::warn!(error = %e, "the record of a read-only call could not be kept");
                }
                self.answer(op, Err(e));
                true
            }
        }
    }

    /// Forgets the sessions and effects `ops` were decided on: the store found one changed.
    pub(super) fn forget_rows_of(&self, ops: &[Op]) {
        if let Some(memory) = &self.inner().remembered {
            for op in ops {
                match op.wanted() {
                    Some(wanted) => memory.forget_session(op.org(), wanted.session),
                    None => {
                        if let Op::Update(update) = op {
                            memory.forget_effect(update.effect);
                        }
                    }
                }
            }
        }
    }

    /// The core's decision on `op` from `session` as remembered and no earlier effect, when it
    /// is to record the call: its answer and its writes.
    pub(super) fn decide_remembered(
        &self,
        op: &Op,
        session: &Session,
    ) -> Option<(Answer, Vec<Write>)> {
        match op {
            Op::Intercept { call, .. } => {
                let view = self.intercept_view(call, Some(session.clone()), None, None);
                match core::decide_intercept(call, view).ok()? {
                    Decision::Answer(answer, writes) => {
                        let decision = Decision::Answer(answer, writes.clone());
                        Some((Answer::Decision(decision), writes))
                    }
                    Decision::Wait(_) => None,
                }
            }
            Op::Record { record, .. } => {
                let writes = core::record_read(
                    &record.call,
                    record.effect,
                    record.started,
                    Some(session.clone()),
                    record.outcome.clone(),
                    record.verdicts.clone(),
                    self.now(),
                )
                .ok()?;
                Some((Answer::Recorded(None), writes))
            }
            Op::Update(_) => None,
        }
    }
}
