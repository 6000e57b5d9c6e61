//! Taking credentials on HTTP (and, for a gateway in front of a remote engine, asking it whose
//! they are): API keys per org, sent as `Authorization: Bearer`; with `[oauth]`, also the
//! authorization server's access tokens ([`undolog_identity::oauth`]) and the dashboard's sign-in
//! cookie ([`crate::sign_in`]). What a credential proves is [`undolog_identity`]'s.
//!
//! With no key in the store the gateway is in open mode: it serves org `default` to the local
//! operator, with every right, and only on a loopback address (start-up refuses anything else;
//! cross-site and rebinding requests are refused by [`crate::http`]'s origin guard). Once a key
//! exists every request needs one, and the org and role always come from the key — a header may
//! name the org, but only to agree with it. A revoked key stops working within
//! [`KEY_CACHE_TTL`].

use std::sync::Arc;

use axum::Json;
use axum::{
    extract::{Request, State},
    http::{HeaderMap, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde_json::json;
use undolog_identity::{
    Credential, KEY_PREFIX, Presented, Principal, hash,
    oauth::{Challenge, Refusal},
};
use undolog_types::Role;

use crate::{Error, Gateway, engine_link::EngineLink, grpc::client::RemoteEngine};

impl Gateway {
    /// Who is calling, from the request's headers.
    pub(crate) async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Error> {
        let presented = Presented::of(headers.get(header::AUTHORIZATION));
        let mut principal = match &self.engine {
            EngineLink::Remote(remote) => self.principal_of_engine(remote, &presented).await?,
            EngineLink::Local(_) => self.principal_here(headers).await?,
        };
        principal.presented = presented;
        if let Some(named) = headers.get("x-undolog-org-id") {
            let named = named.to_str().unwrap_or_default();
            if named != principal.org.as_str() {
                return Err(Error::Forbidden(format!(
                    "X-UndoLog-Org-Id says {named:?} but the credentials are for org {:?}; \
                     drop the header or use a key of that org",
                    principal.org.as_str()
                )));
            }
        }
        Ok(principal)
    }

    /// Who the engine says `presented` belongs to, remembered for [`KEY_CACHE_TTL`] as a key
    /// checked here is.
    async fn principal_of_engine(
        &self,
        remote: &RemoteEngine,
        presented: &Presented,
    ) -> Result<Principal, Error> {
        let hash = hash(presented.text());
        if let Some(principal) = self.key_cache.get(&hash) {
            return Ok(principal);
        }
        // Boxed, as a token's check below: every request's future holds this one, and only a
        // credential not remembered needs the request to the engine.
        let principal = Box::pin(remote.authenticate(presented.clone())).await?;
        self.key_cache.put(hash, principal.clone());
        Ok(principal)
    }

    /// Who is calling, checked against this gateway's own store and authorization server.
    async fn principal_here(&self, headers: &HeaderMap) -> Result<Principal, Error> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .map(|v| {
                v.to_str()
                    .ok()
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::trim)
                    .ok_or_else(|| {
                        Error::Unauthorized(
                            "the Authorization header must be `Bearer <API key or access token>`"
                                .into(),
                        )
                    })
            })
            .transpose()?;
        let principal = match (bearer, &self.oauth) {
            // API keys are `ul_…`; anything else is the authorization server's token.
            (Some(token), Some(oauth)) if !token.starts_with(KEY_PREFIX) => {
                Box::pin(oauth.principal(token))
                    .await
                    .map_err(|refusal| match refusal {
                        Refusal::Invalid(why) => Error::InvalidToken(why),
                        Refusal::NoRole(why) => Error::RoleMissing {
                            needed: Role::Agent,
                            message: why,
                        },
                    })?
            }
            (Some(secret), _) => {
                undolog_identity::key_principal(self.store.as_deref(), &self.key_cache, secret)
                    .await?
            }
            (None, _) if self.open_mode().await? => Principal::open(),
            (None, Some(oauth)) => {
                return Err(Error::Unauthorized(format!(
                    "this gateway needs an access token of {} (its metadata is at {}) or an API \
                     key: send `Authorization: Bearer <token or key>`",
                    oauth.settings.issuer,
                    oauth.metadata_url()
                )));
            }
            (None, None) => {
                return Err(Error::Unauthorized(
                    "this gateway needs an API key: send `Authorization: Bearer <key>`".into(),
                ));
            }
        };
        Ok(principal)
    }

    /// Open mode: no key exists yet. While open, the store is asked again at most every
    /// [`OPEN_MODE_RECHECK`], so a key made by another process closes it within that; keys are
    /// never deleted, so once one is seen the answer is kept.
    pub(crate) async fn open_mode(&self) -> Result<bool, Error> {
        // With an authorization server configured every request needs a credential.
        if self.oauth.is_some() || self.key_cache.keys_exist() {
            return Ok(false);
        }
        if self.key_cache.recently_open() {
            return Ok(true);
        }
        let store = match (&self.store, &self.engine) {
            (Some(store), _) => store,
            // The engine knows: it takes no credential while it is open.
            (None, EngineLink::Remote(remote)) => {
                return match self
                    .principal_of_engine(remote, &Presented::default())
                    .await
                {
                    Ok(principal) => Ok(principal.is_local_operator()),
                    Err(e @ Error::EngineUnreachable { .. }) => Err(e),
                    Err(_) => Ok(false),
                };
            }
            (None, EngineLink::Local(_)) => return Ok(false),
        };
        let exist = store
            .has_api_keys()
            .await
            .map_err(|e| Error::Engine(e.into()))?;
        if exist {
            self.key_cache.note_keys_exist();
        } else {
            self.key_cache.note_open();
        }
        Ok(!exist)
    }
}

/// Axum middleware: puts the caller's [`Principal`] into the request, or answers 401/403 with
/// the `WWW-Authenticate` challenge that says what to send (with `[oauth]`: where to get a token,
/// or which scope is missing).
///
/// `GET /events` also takes the key as `?access_token=<key>`, because a browser's `EventSource`
/// cannot send headers; no other route does, so keys stay out of URLs everywhere else. A
/// dashboard signed in through the authorization server sends its session cookie instead
/// ([`crate::sign_in`]).
pub(crate) async fn require_principal(
    State(gateway): State<Arc<Gateway>>,
    mut request: Request,
    next: Next,
) -> Response {
    let authenticated = match (query_token(&request), &gateway.oauth) {
        (Some(token), _) => {
            let mut headers = request.headers().clone();
            match axum::http::HeaderValue::from_str(&format!("Bearer {token}")) {
                Ok(value) => {
                    headers.insert(header::AUTHORIZATION, value);
                    gateway.authenticate(&headers).await
                }
                Err(_) => Err(Error::Unauthorized(
                    "access_token is not a valid API key".into(),
                )),
            }
        }
        (None, Some(oauth)) if !request.headers().contains_key(header::AUTHORIZATION) => {
            match gateway
                .logins
                .signed_in(request.method(), request.headers())
            {
                Some(signed_in) => signed_in,
                None => gateway.authenticate(request.headers()).await,
            }
        }
        (None, _) => gateway.authenticate(request.headers()).await,
    };
    let (principal, mut response) = match authenticated {
        Ok(principal) => {
            request.extensions_mut().insert(principal.clone());
            let answered = next.run(request);
            (Some(principal), answered.await)
        }
        Err(e) => (None, e.into_response()),
    };
    let challenge = response.extensions().get::<Challenge>().cloned();
    let value = match (&gateway.oauth, challenge) {
        // A scope is what a token lacks; a key's role is not a scope.
        (Some(oauth), Some(Challenge::InsufficientScope(role))) => principal
            .is_none_or(|p| matches!(p.credential, Credential::Token { .. }))
            .then(|| oauth.challenge(&Challenge::InsufficientScope(role))),
        (Some(oauth), Some(challenge)) => Some(oauth.challenge(&challenge)),
        (None, Some(Challenge::Missing | Challenge::InvalidToken(_))) => Some(
            axum::http::HeaderValue::from_static("Bearer realm=\"undolog\""),
        ),
        _ => None,
    };
    if let Some(value) = value {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// The key in `?access_token=`, on `GET /events` only and only when no Authorization header is
/// sent (the header wins).
fn query_token(request: &Request) -> Option<String> {
    if request.uri().path() != "/events" || request.headers().contains_key(header::AUTHORIZATION) {
        return None;
    }
    request.uri().query()?.split('&').find_map(|pair| {
        let value = pair.strip_prefix("access_token=")?;
        // Keys are `ul_` and hex, so they need no decoding; anything else fails as unknown.
        Some(value.to_owned())
    })
}

/// Whether requests need a key now, whether a person may sign in through the identity provider
/// instead, and whether this browser is signed in so. The dashboard asks before it calls
/// anything, so a person is asked for a key (or offered the sign-in) instead of seeing failed
/// requests.
pub(crate) async fn mode(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    let sign_in = gateway
        .oauth
        .as_ref()
        .is_some_and(|o| o.settings.dashboard.is_some());
    let signed_in = gateway.oauth.is_some()
        && matches!(
            gateway.logins.signed_in(&axum::http::Method::GET, &headers),
            Some(Ok(_))
        );
    match gateway.open_mode().await {
        Ok(open) => axum::Json(serde_json::json!({
            "api_key_required": !open,
            "sign_in": sign_in.then_some("/v1/auth/login"),
            "signed_in": signed_in,
        }))
        .into_response(),
        Err(e) => e.into_response(),
    }
}

/// Who the credentials are: the org, key id and role, for the dashboard's header and the CLI;
/// for a signed-in dashboard also the CSRF token its changes must carry.
pub(crate) async fn whoami(
    State(gateway): State<Arc<Gateway>>,
    axum::Extension(principal): axum::Extension<Principal>,
    headers: HeaderMap,
) -> Response {
    let csrf = match (&gateway.oauth, headers.contains_key(header::AUTHORIZATION)) {
        (Some(_), false) => gateway.logins.csrf(&headers),
        _ => None,
    };
    let mut me = serde_json::json!({
        "org": principal.org,
        "key_id": principal.key_id(),
        "role": principal.role,
        "principal": principal.actor(),
    });
    if let Some(csrf) = csrf {
        me["csrf"] = csrf.into();
    }
    axum::Json(me).into_response()
}

/// `GET /.well-known/oauth-protected-resource[/…]`: the RFC 9728 document; 404 without `[oauth]`.
pub(crate) async fn resource_metadata(State(gateway): State<Arc<Gateway>>) -> Response {
    match &gateway.oauth {
        Some(oauth) => Json(oauth.metadata()).into_response(),
        None => (
            axum::http::StatusCode::NOT_FOUND,
            Json(json!({
                "error": "this gateway takes API keys only: it has no [oauth] section",
                "code": "not_found",
            })),
        )
            .into_response(),
    }
}
