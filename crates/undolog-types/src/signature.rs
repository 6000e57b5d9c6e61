//! The call signature: what makes two tool calls "the same call".
//!
//! `signature = hex(BLAKE3-256(JCS({"v": 1, "org", "session", "tool", "args"} + "step"?)))`, the
//! same in every language that speaks to UndoLog. The lock key that serializes identical calls is
//! FNV-1a 64 over the signature's hex text; a collision only makes two calls wait for each other.

use std::{fmt, sync::Arc};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::{Error, OrgId, SessionId, canonical};

/// The version of the signature scheme, part of every signed object.
pub const SIGNATURE_VERSION: u64 = 1;

/// Tool arguments: always a JSON object whose numbers are exact doubles. Shared, never changed:
/// a call's arguments go to the log, the signature, the interceptors and the upstream, and a copy
/// of them is a count, not a copy of the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Value", into = "Value")]
pub struct Args(Arc<Map<String, Value>>);

impl Args {
    /// Parses arguments from JSON text, checking every number token (see [`canonical::parse`]).
    pub fn parse(text: &str) -> Result<Args, Error> {
        Args::try_from(canonical::parse(text)?)
    }

    /// No arguments: `{}`.
    pub fn empty() -> Args {
        Args(Arc::default())
    }

    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }

    /// The canonical text of the arguments.
    pub fn canonical(&self) -> String {
        let mut text = String::new();
        self.write(&mut text);
        text
    }

    /// The length in bytes of the arguments' canonical text, without writing it out.
    pub fn canonical_len(&self) -> usize {
        let mut length = canonical::Length::default();
        self.write(&mut length);
        length.0
    }

    fn write(&self, sink: &mut impl canonical::Sink) {
        // Every number was checked on the way in, so canonicalization cannot fail.
        canonical::write_object(sink, &self.0).expect("arguments were validated when constructed");
    }
}

impl TryFrom<Value> for Args {
    type Error = Error;

    fn try_from(value: Value) -> Result<Args, Error> {
        match value {
            Value::Object(map) => {
                // Checks every number.
                canonical::write_object(&mut canonical::Length::default(), &map)?;
                Ok(Args(Arc::new(map)))
            }
            other => Err(Error::ArgumentsNotObject(json_kind(&other))),
        }
    }
}

impl From<Args> for Value {
    fn from(args: Args) -> Value {
        Value::Object(Arc::unwrap_or_clone(args.0))
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Everything that identifies one tool call for replay.
#[derive(Debug, Clone, PartialEq)]
pub struct CallIdentity<'a> {
    pub org: &'a OrgId,
    pub session: &'a SessionId,
    pub tool: &'a str,
    pub args: &'a Args,
    /// The caller's step index; the SDK supplies one, a plain MCP client does not.
    pub step: Option<u64>,
}

impl CallIdentity<'_> {
    /// The object that is canonicalized and hashed.
    pub fn signed_object(&self) -> Value {
        let mut obj = json!({
            "v": SIGNATURE_VERSION,
            "org": self.org.as_str(),
            "session": self.session.as_str(),
            "tool": self.tool,
            "args": Value::Object(self.args.as_map().clone()),
        });
        if let Some(step) = self.step {
            obj["step"] = json!(step);
        }
        obj
    }

    /// The canonical text that is hashed: [`signed_object`](Self::signed_object)'s, written
    /// straight from the identity.
    pub fn canonical(&self) -> String {
        let mut text = String::new();
        self.write(&mut text);
        text
    }

    /// The BLAKE3 of the canonical text, hashed as it is written.
    pub fn signature(&self) -> Signature {
        let mut hashing = canonical::Hashing::default();
        self.write(&mut hashing);
        Signature::of_hash(&hashing.finalize())
    }

    /// Writes the signed object's canonical text: its keys in canonical order, `args`, `org`,
    /// `session`, `step`, `tool`, `v`.
    fn write(&self, sink: &mut impl canonical::Sink) {
        sink.put("{\"args\":");
        self.args.write(sink);
        sink.put(",\"org\":");
        canonical::write_string(sink, self.org.as_str());
        sink.put(",\"session\":");
        canonical::write_string(sink, self.session.as_str());
        if let Some(step) = self.step {
            sink.put(",\"step\":");
            canonical::write(sink, &Value::from(step))
                .expect("arguments and step are exact numbers");
        }
        sink.put(",\"tool\":");
        canonical::write_string(sink, self.tool);
        sink.put(",\"v\":");
        sink.put(itoa::Buffer::new().format(SIGNATURE_VERSION));
        sink.put("}");
    }
}

/// Lowercase hex of a BLAKE3-256 digest of canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Signature(String);

impl Signature {
    /// Hashes canonical JSON text.
    pub fn of_canonical(canonical: &str) -> Signature {
        Signature::of_hash(&blake3::hash(canonical.as_bytes()))
    }

    fn of_hash(hash: &blake3::Hash) -> Signature {
        Signature(hash.to_hex().as_str().to_owned())
    }

    /// Takes a signature read back from storage.
    pub fn from_stored(hex: String) -> Signature {
        Signature(hex)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key that serializes identical calls (an advisory lock in PostgreSQL).
    pub fn lock_key(&self) -> LockKey {
        LockKey::of(self.0.as_bytes())
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// FNV-1a 64 of a signature's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockKey(pub u64);

impl LockKey {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    pub fn of(bytes: &[u8]) -> LockKey {
        LockKey(bytes.iter().fold(Self::OFFSET_BASIS, |hash, &b| {
            (hash ^ u64::from(b)).wrapping_mul(Self::PRIME)
        }))
    }

    /// The same bits as a signed integer, as PostgreSQL's `pg_advisory_xact_lock(bigint)` takes.
    pub fn as_i64(self) -> i64 {
        self.0 as i64
    }
}
