//! The gateway as an OAuth 2.1 resource server, as the MCP authorization spec asks of an HTTP MCP
//! server: it publishes its protected resource metadata (RFC 9728), takes JWT access tokens of
//! the configured authorization server (signature by the issuer's JWKS; `iss`, `exp`/`nbf` and
//! the audience checked: RFC 8707, a token minted for another resource is refused), and maps a
//! token to a [`Principal`]: the org from a claim, the role from scopes. A refusal says why in
//! `WWW-Authenticate`, so a client can start or widen its authorization. The token is the
//! client's credential here and is never sent to an upstream.

mod introspection;
pub mod keys;

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use http::HeaderValue;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use undolog_config::OAuthSettings;
use undolog_types::{OrgId, Role};

use crate::{Credential, Principal};

/// Verified tokens kept, by hash, until they expire; above this many the expired go first.
const CACHE_PRUNE_ABOVE: usize = 4096;

/// Why a token was not taken. Each message says what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 401 `invalid_token`.
    Invalid(String),
    /// 403 `insufficient_scope`: the token proves who it is, and grants no role.
    NoRole(String),
}

/// What a refusal or a missing credential tells the client in `WWW-Authenticate`, put on the
/// response by [`crate::Error`] and written out by the auth middleware, which knows the settings.
#[derive(Debug, Clone)]
pub enum Challenge {
    /// No credentials, or an API key that is not known: where to get a token.
    Missing,
    InvalidToken(String),
    /// The role a route needs, and the principal lacks.
    InsufficientScope(Role),
}

/// The claims the gateway reads; the rest are looked up by name (the org claim is configurable).
#[derive(Debug, Deserialize)]
pub(crate) struct Claims {
    pub(crate) sub: String,
    pub(crate) exp: u64,
    #[serde(default)]
    pub(crate) scope: Option<String>,
    /// Some servers send scopes as an array under `scp`.
    #[serde(default)]
    pub(crate) scp: Option<Vec<String>>,
    #[serde(flatten)]
    pub(crate) other: Map<String, Value>,
}

/// The resource server: settings, the issuer's keys, and the tokens verified lately.
#[derive(Debug)]
pub struct OAuth {
    pub settings: OAuthSettings,
    pub keys: keys::KeySet,
    verified: Mutex<HashMap<blake3::Hash, (Principal, Instant)>>,
}

impl OAuth {
    pub fn new(settings: OAuthSettings) -> OAuth {
        OAuth {
            keys: keys::KeySet::new(&settings.issuer, settings.jwks_uri.clone()),
            settings,
            verified: Mutex::default(),
        }
    }

    /// Where this resource's metadata is: RFC 9728's well-known URL with the resource's path.
    pub fn metadata_url(&self) -> String {
        let resource = &self.settings.resource;
        let mut url = resource.clone();
        let path = resource.path().trim_end_matches('/');
        url.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
        url.set_query(None);
        url.to_string()
    }

    /// The RFC 9728 document.
    pub fn metadata(&self) -> Value {
        let scopes = &self.settings.scopes;
        json!({
            "resource": self.settings.resource.as_str(),
            "authorization_servers": [self.settings.issuer],
            "scopes_supported": [scopes.agent, scopes.approver, scopes.admin],
            "bearer_methods_supported": ["header"],
            "resource_name": "UndoLog gateway",
        })
    }

    /// The scope that grants `role`.
    fn scope_of(&self, role: Role) -> &str {
        let scopes = &self.settings.scopes;
        match role {
            Role::Agent => &scopes.agent,
            Role::Approver => &scopes.approver,
            Role::Admin => &scopes.admin,
        }
    }

    /// The `WWW-Authenticate` value for `challenge`.
    pub fn challenge(&self, challenge: &Challenge) -> HeaderValue {
        let metadata = self.metadata_url();
        let text = match challenge {
            Challenge::Missing => format!(
                "Bearer resource_metadata=\"{metadata}\", scope=\"{}\"",
                self.scope_of(Role::Agent)
            ),
            Challenge::InvalidToken(why) => format!(
                "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{metadata}\"",
                quoted(why)
            ),
            Challenge::InsufficientScope(role) => format!(
                "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{metadata}\"",
                self.scope_of(*role)
            ),
        };
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }

    /// The principal an access token proves, or why it proves none.
    pub async fn principal(&self, token: &str) -> Result<Principal, Refusal> {
        let hash = blake3::hash(token.as_bytes());
        if let Some(principal) = self.remembered(&hash) {
            return Ok(principal);
        }
        let (principal, expires_at) = self.verify(token).await?;
        let mut verified = self.verified.lock().unwrap_or_else(PoisonError::into_inner);
        if verified.len() > CACHE_PRUNE_ABOVE {
            let now = Instant::now();
            verified.retain(|_, (_, until)| *until > now);
            if verified.len() > CACHE_PRUNE_ABOVE {
                // All still good: forget them; they are verified again on their next use.
                verified.clear();
            }
        }
        verified.insert(hash, (principal.clone(), expires_at));
        Ok(principal)
    }

    fn remembered(&self, hash: &blake3::Hash) -> Option<Principal> {
        let verified = self.verified.lock().unwrap_or_else(PoisonError::into_inner);
        verified
            .get(hash)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(principal, _)| principal.clone())
    }

    /// Checks the token and maps it; also when it stops being good.
    pub async fn verify(&self, token: &str) -> Result<(Principal, Instant), Refusal> {
        let header = match jsonwebtoken::decode_header(token) {
            Ok(header) => header,
            // Not a JWT: an opaque token, which only the issuer can tell about.
            Err(e) => match &self.settings.introspection {
                Some(client) => return self.map(introspection::ask(self, client, token).await?),
                None => {
                    return Err(invalid(format!(
                        "is not a signed JWT ({e}); for opaque tokens set \
                         oauth.introspection_client_id"
                    )));
                }
            },
        };
        let settings = &self.settings;
        if !settings.algorithms.contains(&header.alg) {
            return Err(invalid(format!(
                "is signed with {:?}; this gateway takes {:?}",
                header.alg, settings.algorithms
            )));
        }
        let key = self
            .keys
            .key(header.kid.as_deref(), header.alg)
            .await
            .map_err(invalid)?;
        let mut validation = jsonwebtoken::Validation::new(header.alg);
        validation.set_issuer(&[&settings.issuer]);
        validation.set_audience(&[settings.resource.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = settings.leeway.as_secs();
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| invalid(describe(&e, settings)))?
            .claims;
        self.map(claims)
    }

    /// The principal of checked claims (org from the org claim, role from the scopes), and
    /// when it stops being good.
    fn map(&self, claims: Claims) -> Result<(Principal, Instant), Refusal> {
        let settings = &self.settings;
        let org = match claims.other.get(&settings.org_claim) {
            Some(Value::String(name)) => OrgId::new(name).map_err(|e| {
                invalid(format!(
                    "names org {name:?} in `{}`: {e}",
                    settings.org_claim
                ))
            })?,
            Some(_) => {
                return Err(invalid(format!(
                    "has a `{}` claim that is not a string",
                    settings.org_claim
                )));
            }
            None => settings.org.clone().ok_or_else(|| {
                invalid(format!(
                    "names no org: it has no `{}` claim, and oauth.org is not set",
                    settings.org_claim
                ))
            })?,
        };
        let scopes: Vec<&str> = claims
            .scope
            .iter()
            .flat_map(|s| s.split_whitespace())
            .chain(claims.scp.iter().flatten().map(String::as_str))
            .collect();
        let role = [Role::Admin, Role::Approver, Role::Agent]
            .into_iter()
            .find(|role| scopes.contains(&self.scope_of(*role)))
            .ok_or_else(|| {
                Refusal::NoRole(format!(
                    "the access token of {:?} grants none of {:?}, {:?} and {:?}; ask for the \
                     scope of the role you need",
                    claims.sub,
                    settings.scopes.agent,
                    settings.scopes.approver,
                    settings.scopes.admin
                ))
            })?;
        let left = Duration::from_secs(claims.exp.saturating_sub(now()));
        let principal = Principal {
            org,
            role,
            credential: Credential::Token {
                subject: claims.sub,
            },
            presented: Default::default(),
        };
        Ok((principal, Instant::now() + left))
    }
}

/// A refusal of the token, saying why.
fn invalid(why: String) -> Refusal {
    Refusal::Invalid(format!("the access token {why}"))
}

/// Seconds since the epoch.
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// What a failed check means, in words that say what to do.
fn describe(error: &jsonwebtoken::errors::Error, settings: &OAuthSettings) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match error.kind() {
        K::ExpiredSignature => "has expired; get a new one".to_owned(),
        K::ImmatureSignature => "is not valid yet (nbf)".to_owned(),
        K::InvalidAudience => format!(
            "is for another resource: its audience must be {} (RFC 8707)",
            settings.resource
        ),
        K::InvalidIssuer => format!("is not issued by {}", settings.issuer),
        K::InvalidSignature => "has a signature the issuer's keys do not verify".to_owned(),
        K::MissingRequiredClaim(claim) => format!("has no `{claim}` claim"),
        other => format!("cannot be read ({other:?})"),
    }
}

/// `text` fit for a quoted-string of a header: printable ASCII only, quotes and backslashes
/// dropped (a header value that is not ASCII would lose the whole challenge).
fn quoted(text: &str) -> String {
    text.chars()
        .filter(|c| (' '..='~').contains(c) && !matches!(c, '"' | '\\'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn a_description_in_a_challenge_is_printable_ascii_without_quotes() {
        let cases = [
            ("is for another resource", "is for another resource"),
            ("names org \"acme\"", "names org acme"),
            ("back\\slash, new\nline", "backslash, newline"),
            ("org «Zürich»", "org Zrich"),
        ];
        for (text, want) in cases {
            assert_eq!(quoted(text), want, "{text:?}");
        }
    }
}
