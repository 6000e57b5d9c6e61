//! UndoLog's shared vocabulary, with no IO: RFC 8785 canonical JSON, the call signature and its
//! lock key, identifiers, lease tokens, timestamps, tool tiers, credential roles, and the state machines of effects, sessions and
//! approvals. Every other crate speaks in these types; none of them knows HTTP, MCP or SQL.

pub mod canonical;
mod error;
mod ids;
mod lease_token;
mod role;
mod signature;
mod state;
mod strings;
mod tier;
mod time;

pub use error::Error;
pub use ids::{ApprovalId, EffectId, OrgId, SessionId};
pub use lease_token::{LeaseToken, TokenDigest};
pub use role::Role;
pub use signature::{Args, CallIdentity, LockKey, SIGNATURE_VERSION, Signature};
pub use state::{ApprovalState, EffectState, IllegalTransition, SessionState};
pub use tier::Tier;
pub use time::Timestamp;
