//! What a transaction holds back until its next message: each queued statement, the statements a
//! later one may join (migrations 11 and 12), and what the failure of each means to its caller.

use undolog_types::EffectId;

use crate::{Effect, EffectLookup, Error};

/// A statement waiting for the next message, and what its failure means.
pub(super) struct Queued {
    pub(super) statement: Statement,
    pub(super) on_error: OnError,
}

/// A queued statement, as what a statement queued later may join (migrations 11 and 12).
pub(super) enum Statement {
    /// Sent as it is; nothing joins it.
    Sql(String),
    /// The check of [`Tx::expect_no_effect`], sent as `sql` unless the insert of the call's
    /// effect takes it in (`undolog_insert_new_effect`; see [`PostgresTx::take_check`]).
    Check { sql: String, check: Check },
    /// Advisory locks, in the order taken: the locks queued right after join them
    /// (`undolog_lock_calls`).
    Locks(Vec<i64>),
    /// `undolog_replace_effect` with these arguments: the push of the effect's undo entry queued
    /// right after joins it (`undolog_replace_effect_push_undo`).
    ReplaceEffect { effect: EffectId, args: String },
}

impl Queued {
    pub(super) fn text(&self) -> std::borrow::Cow<'_, str> {
        match &self.statement {
            Statement::Sql(sql) | Statement::Check { sql, .. } => sql.as_str().into(),
            Statement::Locks(keys) => {
                let keys: Vec<String> = keys.iter().map(i64::to_string).collect();
                format!("SELECT undolog_lock_calls('{{{}}}')", keys.join(",")).into()
            }
            Statement::ReplaceEffect { args, .. } => {
                format!("SELECT undolog_replace_effect({args})").into()
            }
        }
    }
}

/// What an earlier effect of a call is looked for by, which must not exist.
pub(super) enum Check {
    Signature(String),
    Key(String),
}

impl Check {
    /// The check of `lookup`; `None` for [`EffectLookup::Nothing`], which looks for nothing.
    pub(super) fn of(lookup: EffectLookup<'_>) -> Option<Check> {
        match lookup {
            EffectLookup::Nothing => None,
            EffectLookup::LatestBySignature(signature) => {
                Some(Check::Signature(signature.as_str().to_owned()))
            }
            EffectLookup::LatestByKey(key) => Some(Check::Key(key.to_owned())),
        }
    }

    /// The functions' `p_by` (migrations 8 and 11).
    pub(super) fn by(&self) -> &'static str {
        match self {
            Check::Signature(_) => "signature",
            Check::Key(_) => "key",
        }
    }

    pub(super) fn value(&self) -> &str {
        match self {
            Check::Signature(value) | Check::Key(value) => value,
        }
    }

    /// Whether `e` is an effect this check looks for.
    pub(super) fn finds(&self, e: &Effect) -> bool {
        match self {
            Check::Signature(signature) => e.signature.as_str() == signature,
            Check::Key(key) => e.idempotency_key.as_deref() == Some(key.as_str()),
        }
    }
}

pub(super) enum OnError {
    /// The server's error, as it is.
    Database,
    /// A unique violation: this record exists already.
    Exists(String),
    /// `no_data_found` from `undolog_expect_rows` or `undolog_push_undo`: there is no such record.
    Missing { what: &'static str, id: String },
    /// `UL001` from a conditional write (migration 8): the row changed since it was read.
    Changed { what: &'static str, id: String },
    /// The insert of a new call's effect with the check that it is new (migration 11): `UL001`
    /// when an earlier effect of the call exists, a unique violation when this one does.
    NewEffect { call: String, effect: String },
}

/// The SQLSTATE of a conditional write whose condition does not hold (migration 8).
const CHANGED: &str = "UL001";

impl OnError {
    pub(super) fn explain(&self, error: sqlx::Error) -> Error {
        let sqlx::Error::Database(db) = &error else {
            return error.into();
        };
        match self {
            OnError::Exists(what) if db.is_unique_violation() => Error::AlreadyExists(what.clone()),
            OnError::Missing { what, id } if db.code().as_deref() == Some("P0002") => {
                Error::NotFound {
                    what,
                    id: id.clone(),
                }
            }
            OnError::Changed { what, id } if db.code().as_deref() == Some(CHANGED) => {
                Error::Changed {
                    what,
                    id: id.clone(),
                }
            }
            OnError::NewEffect { call, .. } if db.code().as_deref() == Some(CHANGED) => {
                Error::Changed {
                    what: "call",
                    id: call.clone(),
                }
            }
            OnError::NewEffect { effect, .. } if db.is_unique_violation() => {
                Error::AlreadyExists(effect.clone())
            }
            _ => error.into(),
        }
    }
}
