//! A held call's approval, asked of the engine over gRPC.

use super::*;

impl RemoteEngine {
    pub(super) fn approval_of(&self, reply: proto::ApprovalReply) -> Result<Approval, Error> {
        let approval = reply
            .approval
            .ok_or_else(|| self.garbled("no approval".into()))?;
        self.json("record_json", &approval.record_json)
    }

    pub(crate) async fn approval(
        &self,
        presented: &Presented,
        id: ApprovalId,
    ) -> Result<Approval, Error> {
        let mut client = self.client();
        let request = proto::ApprovalRequest {
            approval_id: id.to_string(),
        };
        let reply = client.get_approval(Self::request(presented, request)).await;
        self.approval_of(reply.map_err(|s| self.refused(&s))?.into_inner())
    }

    pub(crate) async fn approvals(
        &self,
        presented: &Presented,
        state: Option<ApprovalState>,
    ) -> Result<Vec<Approval>, Error> {
        let state = state.map(|s| s.to_string());
        let mut client = self.client();
        let request = proto::ListApprovalsRequest { state };
        let reply = client
            .list_approvals(Self::request(presented, request))
            .await;
        let list = reply.map_err(|s| self.refused(&s))?.into_inner();
        (list.approvals.iter())
            .map(|a| self.json("record_json", &a.record_json))
            .collect()
    }

    /// Approve or Deny (the engine takes who decides from the credentials).
    pub(crate) async fn decide(
        &self,
        presented: &Presented,
        id: ApprovalId,
        approve: bool,
        reason: Option<String>,
        via: &str,
    ) -> Result<Approval, Error> {
        let mut client = self.client();
        let request = Self::request(
            presented,
            proto::DecideRequest {
                approval_id: id.to_string(),
                reason,
                // `api` is said by saying nothing.
                via: (crate::http::admin::Via::of_record(Some(via))?
                    != crate::http::admin::Via::Api)
                    .then(|| via.to_owned()),
            },
        );
        let reply = match approve {
            true => client.approve(request).await,
            false => client.deny(request).await,
        };
        self.approval_of(reply.map_err(|s| self.refused(&s))?.into_inner())
    }

    pub(crate) async fn withdraw(
        &self,
        presented: &Presented,
        id: ApprovalId,
    ) -> Result<Approval, Error> {
        let mut client = self.client();
        let request = proto::ApprovalRequest {
            approval_id: id.to_string(),
        };
        let reply = client.withdraw(Self::request(presented, request)).await;
        self.approval_of(reply.map_err(|s| self.refused(&s))?.into_inner())
    }

    pub(crate) async fn wait_for_decision(
        &self,
        presented: &Presented,
        id: ApprovalId,
        timeout: Duration,
    ) -> Result<Approval, Error> {
        let mut client = self.client();
        let request = proto::WaitRequest {
            approval_id: id.to_string(),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        };
        let reply = client
            .wait_for_decision(Self::request(presented, request))
            .await;
        self.approval_of(reply.map_err(|s| self.refused(&s))?.into_inner())
    }
}
