//! RFC 7662 token introspection, for access tokens that are not JWTs: the gateway asks the
//! authorization server, as the client configured for it, whether a token is active and what it
//! grants, and checks the answer as it checks a JWT's claims (issuer, audience, expiry, subject).
//! An answer is remembered for at most [`REMEMBER_AT_MOST`], so a token revoked at the server
//! stops working here within that.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{Claims, OAuth, Refusal, invalid, now};
use undolog_config::IntrospectionClient;

/// The longest an introspection answer stands for the token.
pub(super) const REMEMBER_AT_MOST: Duration = Duration::from_secs(30);

/// What RFC 7662 §2.2 answers; `aud` may be one string or several.
#[derive(Debug, Deserialize)]
struct Answer {
    active: bool,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    aud: Option<Audience>,
    #[serde(default)]
    exp: Option<u64>,
    #[serde(default)]
    nbf: Option<u64>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(flatten)]
    other: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn names(&self, resource: &str) -> bool {
        match self {
            Audience::One(one) => one == resource,
            Audience::Many(many) => many.iter().any(|a| a == resource),
        }
    }
}

/// The claims of an opaque `token`, as the authorization server tells them; its `exp` at most
/// [`REMEMBER_AT_MOST`] away.
pub(super) async fn ask(
    oauth: &OAuth,
    client: &IntrospectionClient,
    token: &str,
) -> Result<Claims, Refusal> {
    let settings = &oauth.settings;
    let endpoint = match &client.endpoint {
        Some(endpoint) => endpoint.clone(),
        None => oauth
            .keys
            .metadata()
            .await
            .map_err(|e| invalid(format!("could not be checked: {e}")))?
            .introspection_endpoint
            .clone()
            .ok_or_else(|| {
                invalid(
                    "could not be checked: the issuer's metadata names no introspection_endpoint; \
                     set oauth.introspection_endpoint"
                        .to_owned(),
                )
            })?,
    };
    let pairs = [("token", token), ("token_type_hint", "access_token")];
    let basic = (client.client_id.as_str(), client.client_secret.0.as_str());
    let response = oauth
        .keys
        .post_form(&endpoint, &pairs, Some(basic))
        .await
        .map_err(|e| invalid(format!("could not be checked: {e}")))?;
    let status = response.status();
    if !status.is_success() {
        tracing::warn!(%endpoint, %status, "token introspection refused this gateway's client");
        return Err(invalid(format!(
            "could not be checked: the introspection endpoint answered {status} (check \
             oauth.introspection_client_id and its secret)"
        )));
    }
    let answer: Answer = response.json().await.map_err(|e| {
        invalid(format!(
            "could not be checked: the introspection answer is not RFC 7662's ({e})"
        ))
    })?;
    if !answer.active {
        return Err(invalid(
            "is not active: it expired, was revoked, or is not the issuer's".to_owned(),
        ));
    }
    if answer
        .iss
        .as_ref()
        .is_some_and(|iss| *iss != settings.issuer)
    {
        return Err(invalid(format!("is not issued by {}", settings.issuer)));
    }
    let resource = settings.resource.as_str();
    if !answer.aud.as_ref().is_some_and(|aud| aud.names(resource)) {
        return Err(invalid(format!(
            "is for another resource: its audience must be {resource} (RFC 8707)"
        )));
    }
    let (now, leeway) = (now(), settings.leeway.as_secs());
    if answer.exp.is_some_and(|exp| exp + leeway <= now) {
        return Err(invalid("has expired; get a new one".to_owned()));
    }
    if answer.nbf.is_some_and(|nbf| nbf > now + leeway) {
        return Err(invalid("is not valid yet (nbf)".to_owned()));
    }
    let sub = answer
        .sub
        .ok_or_else(|| invalid("has no `sub` claim".to_owned()))?;
    let latest = now + REMEMBER_AT_MOST.as_secs();
    Ok(Claims {
        sub,
        exp: answer.exp.map_or(latest, |exp| exp.min(latest)),
        scope: answer.scope,
        scp: None,
        other: answer.other,
    })
}
