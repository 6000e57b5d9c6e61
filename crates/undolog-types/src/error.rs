/// What can go wrong when turning outside input into UndoLog's types.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("malformed JSON: {0}; send one well-formed JSON value")]
    MalformedJson(String),
    #[error(
        "the number {0} would not survive canonical JSON as written (an integer past 2^53 that \
         an IEEE-754 double writes with other digits, or a number out of a double's range); \
         send it as a string instead"
    )]
    InexactNumber(String),
    #[error("tool arguments must be a JSON object, got {0}; wrap the values in an object")]
    ArgumentsNotObject(&'static str),
    #[error("{what} must not be empty")]
    Empty { what: &'static str },
    #[error("{what} is {len} bytes, over the limit of {limit}; send less or raise the limit")]
    TooLarge {
        what: &'static str,
        len: usize,
        limit: usize,
    },
    #[error("unknown {kind} {value:?}; expected one of: {expected}")]
    UnknownVariant {
        kind: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("{0:?} is not a valid id: {1}")]
    InvalidId(String, String),
    #[error(
        "that is not a lease token: send the `lease_token` the intercept's `execute` answer gave \
         (lt_ and 64 lowercase hex digits)"
    )]
    InvalidLeaseToken,
}
