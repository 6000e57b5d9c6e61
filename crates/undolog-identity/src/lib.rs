//! Who a request acts for: API keys per org (stored as BLAKE3 hashes, sent as `Authorization:
//! Bearer`), the access tokens of an OAuth authorization server ([`oauth`]: the gateway as a
//! resource server), and the [`Principal`] either proves: an org, a role, a credential.
//!
//! It holds the checks of credentials and what they prove; it reads keys from the store and
//! tokens' keys from the issuer, and serves nothing: the surfaces that take credentials (HTTP,
//! gRPC) read them from their requests and map its [`Error`] to their answers.

mod error;
mod keys;
pub mod oauth;
mod presented;

use undolog_types::{OrgId, Role};

pub use error::Error;
pub use keys::{
    KEY_CACHE_TTL, KEY_PREFIX, KeyCache, NewKey, OPEN_MODE_RECHECK, create_key, hash, key_principal,
};
pub use presented::{Acting, Presented};

/// Who a request acts for: its org, what its role allows, and what proved it. Two are the same
/// principal when these agree, whatever text the client presented (a renewed token is still its
/// subject).
#[derive(Debug, Clone)]
pub struct Principal {
    pub org: OrgId,
    pub role: Role,
    pub credential: Credential,
    /// What the client sent, for a gateway in front of a remote engine to pass on.
    pub presented: Presented,
}

impl PartialEq for Principal {
    fn eq(&self, other: &Principal) -> bool {
        (&self.org, self.role, &self.credential) == (&other.org, other.role, &other.credential)
    }
}

impl Eq for Principal {}

/// What proved a [`Principal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// Nothing: open mode's local operator, or the stdio client.
    Local,
    /// One of this gateway's API keys.
    ApiKey { id: String },
    /// An access token of the configured authorization server, for this subject (`sub`).
    Token { subject: String },
}

impl Principal {
    /// Whom an engine request made for this principal acts for.
    pub fn acting(&self) -> Acting<'_> {
        Acting {
            org: &self.org,
            presented: &self.presented,
        }
    }

    /// Open mode's only principal: the person at this machine, with every right.
    pub fn open() -> Principal {
        Principal {
            org: OrgId::new("default").expect("a valid org name"),
            role: Role::Admin,
            credential: Credential::Local,
            presented: Presented::default(),
        }
    }

    /// The MCP client of `undolog stdio` (a desktop agent): it calls tools, in org `default`.
    pub fn stdio() -> Principal {
        Principal {
            role: Role::Agent,
            ..Principal::open()
        }
    }

    /// Who this is, as recorded with the calls it makes and the decisions it takes.
    pub fn actor(&self) -> String {
        match (&self.credential, self.role) {
            (Credential::ApiKey { id }, _) => format!("api-key:{id}"),
            (Credential::Token { subject }, _) => format!("oauth:{subject}"),
            (Credential::Local, Role::Agent) => "stdio client".to_owned(),
            (Credential::Local, _) => "local operator".to_owned(),
        }
    }

    /// What this principal reads of its org's log: an agent, only the sessions that belong to
    /// it (those it opened, its runs); an approver or an admin, the whole org.
    pub fn reader(&self) -> undolog_engine::Reader {
        match self.role {
            Role::Agent => undolog_engine::Reader::Caller(self.actor()),
            Role::Approver | Role::Admin => undolog_engine::Reader::Org,
        }
    }

    /// The key that proved this principal, if a key did.
    pub fn key_id(&self) -> Option<&str> {
        match &self.credential {
            Credential::ApiKey { id } => Some(id),
            _ => None,
        }
    }

    /// Whether this is open mode's local operator (the one person of a gateway without keys).
    pub fn is_local_operator(&self) -> bool {
        self.credential == Credential::Local && self.role == Role::Admin
    }

    /// Refuses (403) unless this principal's role includes `needed`; `action` says what was
    /// asked, for the message.
    pub fn require(&self, needed: Role, action: &str) -> Result<(), Error> {
        if self.role.includes(needed) {
            return Ok(());
        }
        let how = match self.credential {
            Credential::Token { .. } => format!(
                "sign in with a token that grants the {needed} role's scope (or use a key made \
                 with `undolog keys create --org {} --role {needed}`)",
                self.org
            ),
            _ => format!(
                "use a key with that role (an admin makes one with `undolog keys create --org {} \
                 --role {needed}`)",
                self.org
            ),
        };
        Err(Error::RoleMissing {
            needed,
            message: format!(
                "{action} needs the {needed} role, and {} is an {}: {how}",
                self.actor(),
                self.role,
            ),
        })
    }
}
