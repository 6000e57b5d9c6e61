//! Who reads the log. An agent reads only the sessions that belong to it (the ones it opened,
//! its runs); approvers and admins, and the engine's own work, read the whole org. A session an
//! agent may not read is not there for it: unknown, as another org's.

use std::collections::HashSet;

use undolog_store::{Approval, Effect, Session};
use undolog_types::{ApprovalState, EffectId, OrgId, SessionId};

use crate::{Engine, Error};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reader {
    /// The whole org.
    Org,
    /// One caller (`api-key:…`, `oauth:…`): the sessions that belong to it, and their effects.
    Caller(String),
}

impl Reader {
    /// Whether this reader sees `session`.
    pub fn reads(&self, session: &Session) -> bool {
        match self {
            Reader::Org => true,
            Reader::Caller(caller) => session.belongs_to(Some(caller)),
        }
    }
}

impl Engine {
    /// The sessions `reader` sees, oldest first (for one caller, chosen by the store's query).
    pub async fn sessions_read_by(
        &self,
        org: &OrgId,
        reader: &Reader,
    ) -> Result<Vec<Session>, Error> {
        let mut tx = self.begin(org).await?;
        Ok(match reader {
            Reader::Org => tx.sessions().await?,
            Reader::Caller(caller) => tx.sessions_of(caller).await?,
        })
    }

    /// Session `id`, when `reader` sees it.
    pub async fn session_read_by(
        &self,
        org: &OrgId,
        id: &SessionId,
        reader: &Reader,
    ) -> Result<Session, Error> {
        readable(&mut *self.begin(org).await?, id, reader).await
    }

    /// Session `id`'s effects in order of interception, when `reader` sees it.
    pub async fn session_effects_read_by(
        &self,
        org: &OrgId,
        id: &SessionId,
        reader: &Reader,
    ) -> Result<Vec<Effect>, Error> {
        let mut tx = self.begin(org).await?;
        readable(&mut *tx, id, reader).await?;
        Ok(tx.session_effects(id).await?)
    }

    /// Effect `id`, when `reader` sees its session.
    pub async fn effect_read_by(
        &self,
        org: &OrgId,
        id: EffectId,
        reader: &Reader,
    ) -> Result<Effect, Error> {
        let mut tx = self.begin(org).await?;
        let effect = tx.effect(id).await?.ok_or(Error::UnknownEffect(id))?;
        if let Reader::Caller(_) = reader {
            let session = tx.session(&effect.session).await?;
            if !session.is_some_and(|s| reader.reads(&s)) {
                return Err(Error::UnknownEffect(id));
            }
        }
        Ok(effect)
    }

    /// The approvals `reader` sees (`state` alone, when given): those of its sessions.
    pub async fn approvals_read_by(
        &self,
        org: &OrgId,
        state: Option<ApprovalState>,
        reader: &Reader,
    ) -> Result<Vec<Approval>, Error> {
        let approvals = self.approvals(org, state).await?;
        let Some(readable) = self.readable_sessions(org, reader).await? else {
            return Ok(approvals);
        };
        Ok(approvals
            .into_iter()
            .filter(|a| readable.contains(&a.session))
            .collect())
    }

    /// What may or may not have happened ([`Engine::in_doubt`]) in the sessions `reader` sees.
    pub async fn in_doubt_read_by(
        &self,
        org: &OrgId,
        reader: &Reader,
    ) -> Result<Vec<Effect>, Error> {
        let doubtful = self.in_doubt(org).await?;
        let Some(readable) = self.readable_sessions(org, reader).await? else {
            return Ok(doubtful);
        };
        Ok(doubtful
            .into_iter()
            .filter(|e| readable.contains(&e.session))
            .collect())
    }

    /// The ids of the sessions a caller sees; `None` for the whole org.
    async fn readable_sessions(
        &self,
        org: &OrgId,
        reader: &Reader,
    ) -> Result<Option<HashSet<SessionId>>, Error> {
        Ok(match reader {
            Reader::Org => None,
            Reader::Caller(_) => Some(
                (self.sessions_read_by(org, reader).await?.into_iter())
                    .map(|s| s.id)
                    .collect(),
            ),
        })
    }
}

/// Session `id` in `tx`, when `reader` sees it; unknown otherwise, as another org's.
pub(crate) async fn readable(
    tx: &mut dyn undolog_store::Tx,
    id: &SessionId,
    reader: &Reader,
) -> Result<Session, Error> {
    (tx.session(id).await?)
        .filter(|s| reader.reads(s))
        .ok_or_else(|| Error::UnknownSession(id.clone()))
}
