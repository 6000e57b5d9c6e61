//! The authorization server's metadata and signing keys: discovered once, the keys cached and
//! fetched again when a token names a key not seen yet (a rotation) or the set grows old.

use std::{
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use jsonwebtoken::{
    Algorithm, DecodingKey,
    jwk::{JwkSet, PublicKeyUse},
};
use reqwest::{
    Url,
    header::{ACCEPT, CONTENT_TYPE},
};
use serde::Deserialize;

/// A key set is fetched again, whatever it holds, once it is this old.
const MAX_AGE: Duration = Duration::from_secs(10 * 60);

/// A token naming a key the set lacks fetches it again at once (a rotation), then no more such
/// fetches for this long: forged key ids cannot make the gateway hammer the issuer.
const REFETCH_AT_MOST_EVERY: Duration = Duration::from_secs(10);

/// How long one request to the authorization server may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// What the gateway reads of the authorization server's metadata (RFC 8414 / OpenID Discovery).
#[derive(Debug, Clone, Deserialize)]
pub struct ServerMetadata {
    pub issuer: String,
    pub jwks_uri: Option<Url>,
    pub authorization_endpoint: Option<Url>,
    pub token_endpoint: Option<Url>,
    pub introspection_endpoint: Option<Url>,
}

/// One verification key of the set.
#[derive(Debug)]
struct Key {
    id: Option<String>,
    algorithm: Option<Algorithm>,
    key: DecodingKey,
}

#[derive(Debug, Default)]
struct Cached {
    keys: Vec<Key>,
    fetched_at: Option<Instant>,
    /// When a token's unknown key last made the set be fetched.
    refetched_for_unknown_at: Option<Instant>,
}

/// The issuer's metadata and keys, fetched on demand over `http`.
#[derive(Debug)]
pub struct KeySet {
    http: reqwest::Client,
    issuer: String,
    jwks_uri: Option<Url>,
    metadata: tokio::sync::OnceCell<ServerMetadata>,
    cached: Mutex<Cached>,
    /// One fetch at a time; the others wait for it and use what it found.
    fetching: tokio::sync::Mutex<()>,
}

impl KeySet {
    pub(crate) fn new(issuer: &str, jwks_uri: Option<Url>) -> KeySet {
        KeySet {
            http: reqwest::Client::builder()
                .timeout(FETCH_TIMEOUT)
                .build()
                .expect("an HTTP client with a timeout"),
            issuer: issuer.to_owned(),
            jwks_uri,
            metadata: tokio::sync::OnceCell::new(),
            cached: Mutex::default(),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// POSTs `pairs` as a form to one of the authorization server's endpoints, as the client
    /// `basic` (id and secret) when given; the response, or why none came.
    pub async fn post_form(
        &self,
        endpoint: &Url,
        pairs: &[(&str, &str)],
        basic: Option<(&str, &str)>,
    ) -> Result<reqwest::Response, String> {
        let form = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        let mut request = self
            .http
            .post(endpoint.clone())
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json");
        if let Some((id, secret)) = basic {
            request = request.basic_auth(id, Some(secret));
        }
        request
            .body(form)
            .send()
            .await
            .map_err(|e| format!("{endpoint} cannot be reached ({})", causes(&e)))
    }

    /// The authorization server's metadata, read once (a failure is tried again next time).
    pub async fn metadata(&self) -> Result<&ServerMetadata, String> {
        self.metadata
            .get_or_try_init(|| discover(&self.http, &self.issuer))
            .await
    }

    /// The key that verifies a token signed with `algorithm` under key id `kid`.
    pub(crate) async fn key(
        &self,
        kid: Option<&str>,
        algorithm: Algorithm,
    ) -> Result<DecodingKey, String> {
        let fresh = |cached: &Cached, within: Duration| {
            cached.fetched_at.is_some_and(|at| at.elapsed() < within)
        };
        {
            let cached = self.lock();
            if fresh(&cached, MAX_AGE)
                && let Some(key) = pick(&cached.keys, kid, algorithm)
            {
                return Ok(key);
            }
        }
        let _fetching = self.fetching.lock().await;
        let for_unknown = {
            // Someone else may have fetched while this waited.
            let cached = self.lock();
            let current = fresh(&cached, MAX_AGE);
            let lately = cached
                .refetched_for_unknown_at
                .is_some_and(|at| at.elapsed() < REFETCH_AT_MOST_EVERY);
            match pick(&cached.keys, kid, algorithm) {
                Some(key) if current => return Ok(key),
                None if current && lately => return Err(unknown(kid)),
                // A current set that lacks the key: fetched again for it. An old one: renewed.
                _ => current,
            }
        };
        match self.fetch().await {
            Ok(keys) => {
                let mut cached = self.lock();
                cached.keys = keys;
                cached.fetched_at = Some(Instant::now());
                if for_unknown {
                    cached.refetched_for_unknown_at = cached.fetched_at;
                }
                pick(&cached.keys, kid, algorithm).ok_or_else(|| unknown(kid))
            }
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, error = %e, "the issuer's keys could not be fetched");
                // An old set still verifies the tokens it verified before.
                let mut cached = self.lock();
                if for_unknown {
                    cached.refetched_for_unknown_at = Some(Instant::now());
                }
                pick(&cached.keys, kid, algorithm).ok_or(e)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cached> {
        self.cached.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn fetch(&self) -> Result<Vec<Key>, String> {
        let uri = match &self.jwks_uri {
            Some(uri) => uri.clone(),
            None => self.metadata().await?.jwks_uri.clone().ok_or_else(|| {
                format!(
                    "the metadata of {} names no jwks_uri; set oauth.jwks_uri",
                    self.issuer
                )
            })?,
        };
        let set: JwkSet = get_json(&self.http, &uri).await?;
        let keys = set
            .keys
            .iter()
            .filter(|jwk| !matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)))
            .filter_map(|jwk| match DecodingKey::from_jwk(jwk) {
                Ok(key) => Some(Key {
                    id: jwk.common.key_id.clone(),
                    algorithm: jwk
                        .common
                        .key_algorithm
                        .and_then(|a| a.to_string().parse().ok()),
                    key,
                }),
                Err(e) => {
                    tracing::debug!(kid = ?jwk.common.key_id, error = %e, "a key of the set is skipped");
                    None
                }
            })
            .collect();
        Ok(keys)
    }
}

/// The key named `kid`; without a kid, the one key that fits `algorithm`.
fn pick(keys: &[Key], kid: Option<&str>, algorithm: Algorithm) -> Option<DecodingKey> {
    let fits = |key: &&Key| key.algorithm.is_none_or(|a| a == algorithm);
    match kid {
        Some(kid) => keys
            .iter()
            .filter(fits)
            .find(|key| key.id.as_deref() == Some(kid)),
        None => {
            let mut fitting = keys.iter().filter(fits);
            match (fitting.next(), fitting.next()) {
                (Some(only), None) => Some(only),
                _ => None,
            }
        }
    }
    .map(|key| key.key.clone())
}

fn unknown(kid: Option<&str>) -> String {
    match kid {
        Some(kid) => format!("it is signed with key {kid:?}, which the issuer does not publish"),
        None => "it names no key (kid) and the issuer publishes more than one".to_owned(),
    }
}

/// The issuer's metadata: RFC 8414's well-known URL first, then OpenID Connect Discovery's. The
/// document must name the configured issuer exactly (a mix-up otherwise).
async fn discover(http: &reqwest::Client, issuer: &str) -> Result<ServerMetadata, String> {
    let mut tried = Vec::new();
    for uri in metadata_urls(issuer)? {
        match get_json::<ServerMetadata>(http, &uri).await {
            Ok(metadata) if metadata.issuer == issuer => return Ok(metadata),
            Ok(metadata) => {
                return Err(format!(
                    "the metadata at {uri} is for issuer {:?}, not {issuer:?}; check oauth.issuer",
                    metadata.issuer
                ));
            }
            Err(e) => tried.push(e),
        }
    }
    Err(format!(
        "no metadata for issuer {issuer}: {}",
        tried.join("; ")
    ))
}

/// RFC 8414 §3.1 and OpenID Discovery §4 locations of an issuer's metadata.
pub(crate) fn metadata_urls(issuer: &str) -> Result<Vec<Url>, String> {
    let url = Url::parse(issuer).map_err(|e| format!("{issuer:?} is not a URL: {e}"))?;
    let path = url.path().trim_end_matches('/');
    let at = |suffix: &str| {
        let mut u = url.clone();
        u.set_path(suffix);
        u.set_query(None);
        u
    };
    let mut urls = vec![
        at(&format!("/.well-known/oauth-authorization-server{path}")),
        at(&format!("/.well-known/openid-configuration{path}")),
    ];
    if !path.is_empty() {
        urls.push(at(&format!("{path}/.well-known/openid-configuration")));
    }
    Ok(urls)
}

async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    uri: &Url,
) -> Result<T, String> {
    let response = http
        .get(uri.clone())
        .send()
        .await
        .map_err(|e| format!("{uri} cannot be reached ({})", causes(&e)))?;
    if !response.status().is_success() {
        return Err(format!("{uri} answered {}", response.status()));
    }
    response
        .json()
        .await
        .map_err(|e| format!("{uri} did not answer the expected JSON ({e})"))
}

/// An error and its causes, in one line: reqwest's own message leaves out why.
pub(crate) fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::metadata_urls;

    #[test]
    fn metadata_is_looked_for_where_rfc_8414_and_openid_discovery_put_it() {
        let cases = [
            (
                "https://idp.example.com",
                vec![
                    "https://idp.example.com/.well-known/oauth-authorization-server",
                    "https://idp.example.com/.well-known/openid-configuration",
                ],
            ),
            (
                "https://idp.example.com/tenant/1/",
                vec![
                    "https://idp.example.com/.well-known/oauth-authorization-server/tenant/1",
                    "https://idp.example.com/.well-known/openid-configuration/tenant/1",
                    "https://idp.example.com/tenant/1/.well-known/openid-configuration",
                ],
            ),
        ];
        for (issuer, want) in cases {
            let got: Vec<String> = metadata_urls(issuer)
                .unwrap()
                .into_iter()
                .map(String::from)
                .collect();
            assert_eq!(got, want, "{issuer}");
        }
    }
}
