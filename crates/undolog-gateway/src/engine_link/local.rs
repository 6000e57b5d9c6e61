//! [`EngineApi`] on this process's engine: each request in the org it acts for.

use std::time::Duration;

use serde_json::Value;
use undolog_engine::{
    Call, Decider, Engine, Intercept, ReadOutcome, Reader, Rejection, Resolution, StepOutcome,
    UndoPlanned, UndoProgress,
};
use undolog_identity::Acting;
use undolog_store::{Approval, Effect, Session};
use undolog_types::{ApprovalId, ApprovalState, EffectId, LeaseToken, SessionId, Timestamp};

use super::EngineApi;
use crate::Error;

/// A call names its org; it must be the one the request acts for.
fn same_org(acting: Acting<'_>, call: &Call) -> Result<(), Error> {
    match &call.org == acting.org {
        true => Ok(()),
        false => Err(Error::Forbidden(format!(
            "a call in org {} was asked for org {}; a call acts in its caller's org",
            call.org, acting.org
        ))),
    }
}

#[async_trait::async_trait]
impl EngineApi for Engine {
    async fn intercept(&self, acting: Acting<'_>, call: Call) -> Result<Intercept, Error> {
        same_org(acting, &call)?;
        Ok(self.intercept(call).await?)
    }

    async fn reject(
        &self,
        acting: Acting<'_>,
        call: &Call,
        reason: String,
        verdicts: Option<Value>,
    ) -> Result<Option<EffectId>, Error> {
        same_org(acting, call)?;
        Ok(self.reject(call, reason, verdicts).await?)
    }

    async fn record_read(
        &self,
        acting: Acting<'_>,
        call: Call,
        effect: EffectId,
        started: Timestamp,
        outcome: ReadOutcome,
        verdicts: Option<Value>,
    ) -> Result<Option<Rejection>, Error> {
        same_org(acting, &call)?;
        Ok(self
            .record_read(call, effect, started, outcome, verdicts)
            .await?)
    }

    async fn commit_with(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        result: Value,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        Ok(self
            .commit_with(acting.org, effect, token, result, verdicts)
            .await?)
    }

    async fn fail_with(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        error: String,
        details: Option<Value>,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        Ok(self
            .fail_with(acting.org, effect, token, error, details, verdicts)
            .await?)
    }

    async fn not_sent(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        reason: String,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        Ok(self
            .not_sent(acting.org, effect, token, reason, verdicts)
            .await?)
    }

    async fn doubt(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        error: String,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        Ok(self
            .doubt(acting.org, effect, token, error, verdicts)
            .await?)
    }

    async fn await_input(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        request: Value,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        Ok(self
            .await_input(acting.org, effect, token, request, verdicts)
            .await?)
    }

    async fn renew_lease(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
    ) -> Result<Timestamp, Error> {
        Ok(self.renew_lease(acting.org, effect, token).await?)
    }

    async fn effect(&self, acting: Acting<'_>, id: EffectId) -> Result<Effect, Error> {
        Ok(self.effect(acting.org, id).await?)
    }

    async fn resolve_in_doubt(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        resolution: Resolution,
        by: String,
    ) -> Result<(), Error> {
        Ok(self
            .resolve_in_doubt(acting.org, effect, resolution, by)
            .await?)
    }

    async fn sessions(&self, acting: Acting<'_>, reader: &Reader) -> Result<Vec<Session>, Error> {
        Ok(self.sessions_read_by(acting.org, reader).await?)
    }

    async fn session_effects(
        &self,
        acting: Acting<'_>,
        session: &SessionId,
        reader: &Reader,
    ) -> Result<Vec<Effect>, Error> {
        Ok(self
            .session_effects_read_by(acting.org, session, reader)
            .await?)
    }

    async fn snapshot(
        &self,
        acting: Acting<'_>,
        session: &SessionId,
        reader: &Reader,
    ) -> Result<Value, Error> {
        Ok(async move {
            self.snapshot_read_by(acting.org, session, reader)
                .await
                .map(|s| s.body)
        }
        .await?)
    }

    async fn effect_read_by(
        &self,
        acting: Acting<'_>,
        id: EffectId,
        reader: &Reader,
    ) -> Result<Effect, Error> {
        Ok(self.effect_read_by(acting.org, id, reader).await?)
    }

    async fn approvals_read_by(
        &self,
        acting: Acting<'_>,
        state: Option<ApprovalState>,
        reader: &Reader,
    ) -> Result<Vec<Approval>, Error> {
        Ok(self.approvals_read_by(acting.org, state, reader).await?)
    }

    async fn in_doubt_read_by(
        &self,
        acting: Acting<'_>,
        reader: &Reader,
    ) -> Result<Vec<Effect>, Error> {
        Ok(self.in_doubt_read_by(acting.org, reader).await?)
    }

    async fn approve(
        &self,
        acting: Acting<'_>,
        id: ApprovalId,
        by: &Decider,
        reason: Option<String>,
    ) -> Result<Approval, Error> {
        Ok(self.approve(acting.org, id, by, reason).await?)
    }

    async fn deny(
        &self,
        acting: Acting<'_>,
        id: ApprovalId,
        by: &Decider,
        reason: String,
    ) -> Result<Approval, Error> {
        Ok(self.deny(acting.org, id, by, reason).await?)
    }

    async fn withdraw(
        &self,
        acting: Acting<'_>,
        id: ApprovalId,
        by: String,
    ) -> Result<Approval, Error> {
        Ok(self.withdraw(acting.org, id, by).await?)
    }

    async fn approval(&self, acting: Acting<'_>, id: ApprovalId) -> Result<Approval, Error> {
        Ok(self.approval(acting.org, id).await?)
    }

    async fn approvals(
        &self,
        acting: Acting<'_>,
        state: Option<ApprovalState>,
    ) -> Result<Vec<Approval>, Error> {
        Ok(self.approvals(acting.org, state).await?)
    }

    async fn wait_for_decision(
        &self,
        acting: Acting<'_>,
        id: ApprovalId,
        timeout: Duration,
    ) -> Result<Approval, Error> {
        Ok(self.wait_for_decision(acting.org, id, timeout).await?)
    }

    async fn implicit_run(
        &self,
        acting: Acting<'_>,
        principal: &str,
        idle: Duration,
    ) -> Result<SessionId, Error> {
        Ok(self.implicit_run(acting.org, principal, idle).await?)
    }

    async fn begin_undo(&self, acting: Acting<'_>, id: &SessionId) -> Result<UndoPlanned, Error> {
        Ok(self.begin_undo(acting.org, id).await?)
    }

    async fn record_undo_step(
        &self,
        acting: Acting<'_>,
        id: &SessionId,
        claim: &str,
        effect: EffectId,
        outcome: StepOutcome,
    ) -> Result<UndoProgress, Error> {
        Ok(self
            .record_undo_step(acting.org, id, claim, effect, outcome)
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use undolog_engine::ToolPolicy;
    use undolog_identity::Presented;
    use undolog_types::{Args, OrgId, SessionId, Tier};

    use super::*;

    #[test]
    fn a_call_is_asked_only_for_the_org_it_names() {
        let org = |name: &str| OrgId::new(name).unwrap();
        let call = Call::new(
            org("acme"),
            SessionId::new("s-1").unwrap(),
            "transfer",
            Args::try_from(serde_json::json!({})).unwrap(),
            ToolPolicy::new(Tier::ReadOnly),
        );
        let presented = Presented::default();
        for (asked_for, allowed) in [("acme", true), ("globex", false)] {
            let asked_for = org(asked_for);
            let acting = Acting {
                org: &asked_for,
                presented: &presented,
            };
            let answer = same_org(acting, &call);
            assert_eq!(answer.is_ok(), allowed, "{asked_for}: {answer:?}");
        }
    }
}
