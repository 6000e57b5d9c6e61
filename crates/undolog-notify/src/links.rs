//! Approve and deny links: what a notification carries so a person can decide from where they
//! read it.
//!
//! A link names one approval, one decision, the target that carried it, and when it stops
//! working (the approval's own expiry), and is signed with HMAC-SHA256 under `[approvals]
//! link_secret`: `BASE64URL(JSON) "." BASE64URL(MAC)`. A link is not a credential. Opening it
//! shows a confirmation page (GET never decides), and the decision needs an approver's sign-in
//! like any other, four eyes included. It is single-use because the approval it names can be
//! decided once: a second use, or the other link of the pair, finds it decided and is refused.

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{KeyInit, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use undolog_types::{ApprovalId, OrgId, Timestamp};

use undolog_config::Secret;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// Kept apart from any other MAC made with the same secret.
const CONTEXT: &[u8] = b"undolog approval link v1\n";

/// What a link asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkDecision {
    Approve,
    Deny,
}

/// A link's content, as signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    #[serde(rename = "a")]
    pub approval: ApprovalId,
    #[serde(rename = "o")]
    pub org: OrgId,
    #[serde(rename = "d")]
    pub decision: LinkDecision,
    /// The `[[notify]]` target that carried it: the decision's channel is `link:TARGET`.
    #[serde(rename = "t")]
    pub target: String,
    /// Milliseconds since the epoch: the approval's expiry.
    #[serde(rename = "e")]
    pub expires_at: i64,
}

/// Why a link is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("this is not an approval link; open the approval in the dashboard instead")]
    Malformed,
    #[error(
        "this link was not signed by this gateway (it was altered, or another gateway's \
         link_secret signed it); open the approval in the dashboard instead"
    )]
    Tampered,
    #[error(
        "this link expired with its approval; an approval nobody decided in time is denied, \
         and the agent was told"
    )]
    Expired,
}

impl LinkError {
    pub fn code(&self) -> &'static str {
        match self {
            LinkError::Malformed => "link_malformed",
            LinkError::Tampered => "link_tampered",
            LinkError::Expired => "link_expired",
        }
    }
}

/// The key links are signed and checked with.
pub struct LinkKey(Vec<u8>);

impl std::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkKey(***)")
    }
}

impl LinkKey {
    /// The configured secret, or 32 random bytes: links then work only in this process.
    pub fn new(secret: Option<&Secret>) -> LinkKey {
        match secret {
            Some(secret) => LinkKey(secret.0.as_bytes().to_vec()),
            None => {
                let mut bytes = vec![0u8; 32];
                rand::rng().fill_bytes(&mut bytes);
                LinkKey(bytes)
            }
        }
    }

    fn mac(&self, payload: &str) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(CONTEXT);
        mac.update(payload.as_bytes());
        mac
    }

    pub fn sign(&self, link: &Link) -> String {
        let json = serde_json::to_vec(link).expect("a link serializes");
        let payload = URL_SAFE_NO_PAD.encode(json);
        let tag = URL_SAFE_NO_PAD.encode(self.mac(&payload).finalize().into_bytes());
        format!("{payload}.{tag}")
    }

    /// The link `token` is, when this key signed it and it has not expired by `now`.
    pub fn open(&self, token: &str, now: Timestamp) -> Result<Link, LinkError> {
        let (payload, tag) = token.split_once('.').ok_or(LinkError::Malformed)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| LinkError::Malformed)?;
        // Checked before the content is read, in constant time.
        self.mac(payload)
            .verify_slice(&tag)
            .map_err(|_| LinkError::Tampered)?;
        let json = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| LinkError::Malformed)?;
        let link: Link = serde_json::from_slice(&json).map_err(|_| LinkError::Malformed)?;
        if now.as_millis() >= link.expires_at {
            return Err(LinkError::Expired);
        }
        Ok(link)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> Link {
        Link {
            approval: "0190c1d2-0000-7000-8000-000000000001".parse().unwrap(),
            org: OrgId::new("acme").unwrap(),
            decision: LinkDecision::Approve,
            target: "ops-mail".into(),
            expires_at: 10_000,
        }
    }

    /// Flips one character of the part `part` (0: content, 1: signature) of a signed token.
    fn altered(token: &str, part: usize) -> String {
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        let text = &mut parts[part];
        let last = text.pop().unwrap();
        text.push(if last == 'A' { 'B' } else { 'A' });
        parts.join(".")
    }

    #[test]
    fn a_link_opens_only_as_signed_by_this_key_and_before_it_expires() {
        let key = LinkKey::new(Some(&Secret("k".repeat(32))));
        let token = key.sign(&link());
        let other = LinkKey::new(Some(&Secret("j".repeat(32))));
        let mut deny = link();
        deny.decision = LinkDecision::Deny;
        // The content of a deny link under the approve link's signature.
        let swapped = format!(
            "{}.{}",
            key.sign(&deny).split('.').next().unwrap(),
            token.split('.').nth(1).unwrap()
        );
        let cases: Vec<(&str, String, i64, Result<Link, LinkError>)> = vec![
            ("as signed", token.clone(), 9_999, Ok(link())),
            (
                "at its expiry",
                token.clone(),
                10_000,
                Err(LinkError::Expired),
            ),
            (
                "content altered",
                altered(&token, 0),
                1,
                Err(LinkError::Tampered),
            ),
            (
                "signature altered",
                altered(&token, 1),
                1,
                Err(LinkError::Tampered),
            ),
            ("decision swapped", swapped, 1, Err(LinkError::Tampered)),
            (
                "another key's",
                other.sign(&link()),
                1,
                Err(LinkError::Tampered),
            ),
            ("no signature", "abc".into(), 1, Err(LinkError::Malformed)),
            ("not base64", "a.b!c".into(), 1, Err(LinkError::Malformed)),
            ("empty", String::new(), 1, Err(LinkError::Malformed)),
        ];
        for (what, token, now, want) in cases {
            assert_eq!(key.open(&token, Timestamp(now)), want, "{what}");
        }
    }

    #[test]
    fn a_key_made_at_start_up_is_random_and_never_printed() {
        let (a, b) = (LinkKey::new(None), LinkKey::new(None));
        assert_ne!(a.0, b.0);
        assert_eq!(a.0.len(), 32);
        assert_eq!(format!("{a:?}"), "LinkKey(***)");
        let token = a.sign(&link());
        assert_eq!(b.open(&token, Timestamp(1)), Err(LinkError::Tampered));
    }
}
