//! Identifiers. Orgs and sessions are named by callers; effects and approvals get time-ordered
//! UUIDv7 ids from UndoLog.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Error;

/// The longest org or session name accepted, in bytes.
const MAX_NAME_LEN: usize = 256;

macro_rules! name_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn new(name: impl Into<String>) -> Result<$name, Error> {
                let name = name.into();
                if name.is_empty() {
                    return Err(Error::Empty { what: $what });
                }
                if name.len() > MAX_NAME_LEN {
                    return Err(Error::TooLarge { what: $what, len: name.len(), limit: MAX_NAME_LEN });
                }
                if name.chars().any(char::is_control) {
                    return Err(Error::InvalidId(name, "control characters are not allowed".into()));
                }
                Ok($name(name))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = Error;
            fn try_from(s: String) -> Result<$name, Error> {
                $name::new(s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<$name, Error> {
                $name::new(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A new, time-ordered id.
            pub fn generate() -> $name {
                $name(Uuid::now_v7())
            }

            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl From<Uuid> for $name {
            fn from(uuid: Uuid) -> $name {
                $name(uuid)
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<$name, Error> {
                Uuid::parse_str(s).map($name).map_err(|e| Error::InvalidId(s.to_owned(), e.to_string()))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

name_id!(
    /// A tenant. Comes from the caller's credentials, never from a header alone.
    OrgId,
    "org id"
);
name_id!(
    /// One agent session: the unit of replay and of undo.
    SessionId,
    "session id"
);
uuid_id!(
    /// One recorded tool call.
    EffectId
);
uuid_id!(
    /// One request for a person's decision.
    ApprovalId
);
