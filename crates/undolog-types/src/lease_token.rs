//! The secret that makes one executor the owner of one call. The engine hands it out with an
//! `Execute` answer; only whoever presents it may settle the call (commit, fail, renew its lease,
//! say it was not sent or awaits input, put it in doubt). The log keeps only its digest, so no
//! reader of the log, and no API that shows an effect, can learn it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Error;

/// Marks the token's text, so that it is never taken for an API key (`ul_…`) and a secret
/// scanner can recognise it.
const PREFIX: &str = "lt_";
/// 32 random bytes, as lowercase hex.
const HEX_LEN: usize = 64;
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// A call's lease token: unguessable, given to its executor alone. Never printed.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LeaseToken(String);

impl LeaseToken {
    /// A new token from 32 bytes of the thread's cryptographic generator (ChaCha, seeded by the
    /// operating system).
    pub fn generate() -> LeaseToken {
        LeaseToken::from_bytes(rand::random())
    }

    /// The token these bytes spell; for tests and for a caller that draws its own randomness.
    pub fn from_bytes(bytes: [u8; 32]) -> LeaseToken {
        let mut text = String::with_capacity(PREFIX.len() + HEX_LEN);
        text.push_str(PREFIX);
        for byte in bytes {
            text.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
            text.push(char::from(HEX_DIGITS[usize::from(byte & 0xf)]));
        }
        LeaseToken(text)
    }

    /// Reads a token a caller presented; refuses anything not shaped like one.
    pub fn parse(text: &str) -> Result<LeaseToken, Error> {
        let well_formed = text.strip_prefix(PREFIX).is_some_and(|hex| {
            hex.len() == HEX_LEN
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if well_formed {
            Ok(LeaseToken(text.to_owned()))
        } else {
            Err(Error::InvalidLeaseToken)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// What the log keeps of it.
    pub fn digest(&self) -> TokenDigest {
        TokenDigest(blake3::hash(self.0.as_bytes()).to_hex().to_string())
    }
}

impl fmt::Debug for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LeaseToken(…)")
    }
}

impl std::str::FromStr for LeaseToken {
    type Err = Error;
    fn from_str(text: &str) -> Result<LeaseToken, Error> {
        LeaseToken::parse(text)
    }
}

impl TryFrom<String> for LeaseToken {
    type Error = Error;
    fn try_from(text: String) -> Result<LeaseToken, Error> {
        LeaseToken::parse(&text)
    }
}

impl From<LeaseToken> for String {
    fn from(token: LeaseToken) -> String {
        token.0
    }
}

/// The BLAKE3 digest of a [`LeaseToken`], as the log keeps it (lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TokenDigest(String);

impl TokenDigest {
    /// A digest as the store holds it; it is compared, never trusted to be well formed.
    pub fn from_stored(hex: String) -> TokenDigest {
        TokenDigest(hex)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `token` is the one this is the digest of.
    pub fn matches(&self, token: &LeaseToken) -> bool {
        token.digest() == *self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_recognised_by_its_digest_alone() {
        let token = LeaseToken::generate();
        let other = LeaseToken::generate();
        assert_ne!(token, other);
        assert!(token.digest().matches(&token));
        assert!(!token.digest().matches(&other));
        assert_eq!(LeaseToken::parse(token.as_str()), Ok(token.clone()));
        assert_eq!(format!("{token:?}"), "LeaseToken(…)");
        assert!(!token.digest().as_str().contains(&token.as_str()[3..]));
    }

    #[test]
    fn only_the_shape_of_a_token_is_read() {
        let good = LeaseToken::from_bytes([0xab; 32]);
        let cases = [
            (good.as_str().to_owned(), true),
            (good.as_str().to_uppercase(), false),
            (good.as_str()[3..].to_owned(), false),
            (format!("{}0", good.as_str()), false),
            (good.as_str()[..good.as_str().len() - 1].to_owned(), false),
            (format!("ul_{}", &good.as_str()[3..]), false),
            (String::new(), false),
        ];
        for (text, accepted) in cases {
            assert_eq!(LeaseToken::parse(&text).is_ok(), accepted, "{text:?}");
        }
    }
}
