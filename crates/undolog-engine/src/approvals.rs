//! Deciding approvals, expiring them, and waiting for a decision.

use std::time::Duration;

use undolog_store::Approval;
use undolog_types::{ApprovalId, ApprovalState, OrgId};

use crate::{Decider, Engine, Error, core};

impl Engine {
    /// A person approves a held call; the identical call retried (or still held) then runs.
    pub async fn approve(
        &self,
        org: &OrgId,
        approval: ApprovalId,
        by: &Decider,
        reason: Option<String>,
    ) -> Result<Approval, Error> {
        self.decide(org, approval, |effect, approval, now| {
            core::approve(effect, approval, by, reason, now)
        })
        .await
    }

    /// A person denies a held call; the agent gets the reason.
    pub async fn deny(
        &self,
        org: &OrgId,
        approval: ApprovalId,
        by: &Decider,
        reason: impl Into<String>,
    ) -> Result<Approval, Error> {
        let reason = reason.into();
        self.decide(org, approval, |effect, approval, now| {
            core::deny(effect, approval, by, reason, now)
        })
        .await
    }

    /// The caller takes back a request still pending (it cancelled the call waiting on it).
    pub async fn withdraw(
        &self,
        org: &OrgId,
        approval: ApprovalId,
        by: impl Into<String>,
    ) -> Result<Approval, Error> {
        let by = by.into();
        self.decide(org, approval, |effect, approval, now| {
            core::withdraw(effect, approval, by, now)
        })
        .await
    }

    async fn decide(
        &self,
        org: &OrgId,
        id: ApprovalId,
        decide: impl FnOnce(
            undolog_store::Effect,
            Approval,
            undolog_types::Timestamp,
        ) -> Result<Vec<core::Write>, Error>,
    ) -> Result<Approval, Error> {
        let mut tx = self.begin(org).await?;
        let approval = tx.approval(id).await?.ok_or(Error::UnknownApproval(id))?;
        let effect = tx
            .effect(approval.effect)
            .await?
            .ok_or(Error::UnknownEffect(approval.effect))?;
        let now = self.now();
        if approval.state == ApprovalState::Pending && now >= approval.expires_at {
            let (effect, approval) = core::expire(effect, approval, now)?;
            let writes = [
                core::Write::UpdateEffect(effect),
                core::Write::UpdateApproval(approval),
            ];
            self.commit_writes(tx, &writes).await?;
            return Err(Error::ApprovalExpired(id));
        }
        let writes = decide(effect, approval, now)?;
        self.commit_writes(tx, &writes).await?;
        self.approval(org, id).await
    }

    pub async fn approval(&self, org: &OrgId, id: ApprovalId) -> Result<Approval, Error> {
        self.begin(org)
            .await?
            .approval(id)
            .await?
            .ok_or(Error::UnknownApproval(id))
    }

    /// The org's approvals, oldest first, optionally only those in one state.
    pub async fn approvals(
        &self,
        org: &OrgId,
        state: Option<ApprovalState>,
    ) -> Result<Vec<Approval>, Error> {
        Ok(self.begin(org).await?.approvals(state).await?)
    }

    /// Closes every pending request of the org whose time ran out; returns how many.
    pub async fn expire_approvals(&self, org: &OrgId) -> Result<usize, Error> {
        let mut tx = self.begin(org).await?;
        let now = self.now();
        let mut writes = Vec::new();
        for approval in tx.approvals(Some(ApprovalState::Pending)).await? {
            if now < approval.expires_at {
                continue;
            }
            let effect = tx
                .effect(approval.effect)
                .await?
                .ok_or(Error::UnknownEffect(approval.effect))?;
            let (effect, approval) = core::expire(effect, approval, now)?;
            writes.push(core::Write::UpdateEffect(effect));
            writes.push(core::Write::UpdateApproval(approval));
        }
        let expired = writes.len() / 2;
        self.commit_writes(tx, &writes).await?;
        Ok(expired)
    }

    /// Waits (hold mode) until the request is decided or expires, or `timeout` passes.
    pub async fn wait_for_decision(
        &self,
        org: &OrgId,
        id: ApprovalId,
        timeout: Duration,
    ) -> Result<Approval, Error> {
        let decided = self
            .poll_until(timeout, || async {
                let approval = self.approval(org, id).await?;
                if approval.state != ApprovalState::Pending {
                    return Ok(Some(approval));
                }
                if self.now() >= approval.expires_at {
                    self.expire_approvals(org).await?;
                    return Ok(Some(self.approval(org, id).await?));
                }
                Ok(None)
            })
            .await?;
        decided.ok_or(Error::ApprovalWaitTimedOut(id))
    }
}
