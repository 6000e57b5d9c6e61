//! Credentials: API keys per org, stored as BLAKE3 hashes, sent as `Authorization: Bearer`; with
//! `[oauth]`, also the authorization server's access tokens ([`crate::oauth`]) and the
//! dashboard's sign-in cookie.
//!
//! With no key in the store the gateway is in open mode: it serves org `default` to the local
//! operator, with every right, and only on a loopback address (start-up refuses anything else;
//! cross-site and rebinding requests are refused by [`crate::http`]'s origin guard). Once a key
//! exists every request needs one, and the org and role always come from the key — a header may
//! name the org, but only to agree with it. A revoked key stops working within
//! [`KEY_CACHE_TTL`].

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    extract::{Request, State},
    http::{HeaderMap, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use rand::RngCore;
use undolog_store::{ApiKey, Store};
use undolog_types::{OrgId, Role, Timestamp};

use crate::{
    Error, Gateway,
    engine_link::EngineLink,
    grpc::client::{Presented, RemoteEngine, presenting},
    oauth::Challenge,
};

/// Who a request acts for: its org, what its role allows, and what proved it. Two are the same
/// principal when these agree, whatever text the client presented (a renewed token is still its
/// subject).
#[derive(Debug, Clone)]
pub struct Principal {
    pub org: OrgId,
    pub role: Role,
    pub credential: Credential,
    /// What the client sent, for a gateway in front of a remote engine to pass on.
    pub(crate) presented: Presented,
}

impl PartialEq for Principal {
    fn eq(&self, other: &Principal) -> bool {
        (&self.org, self.role, &self.credential) == (&other.org, other.role, &other.credential)
    }
}

impl Eq for Principal {}

/// What proved a [`Principal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// Nothing: open mode's local operator, or the stdio client.
    Local,
    /// One of this gateway's API keys.
    ApiKey { id: String },
    /// An access token of the configured authorization server, for this subject (`sub`).
    Token { subject: String },
}

impl Principal {
    /// Open mode's only principal: the person at this machine, with every right.
    pub fn open() -> Principal {
        Principal {
            org: OrgId::new("default").expect("a valid org name"),
            role: Role::Admin,
            credential: Credential::Local,
            presented: Presented::default(),
        }
    }

    /// The MCP client of `undolog stdio` (a desktop agent): it calls tools, in org `default`.
    pub fn stdio() -> Principal {
        Principal {
            role: Role::Agent,
            ..Principal::open()
        }
    }

    /// Who this is, as recorded with the calls it makes and the decisions it takes.
    pub fn actor(&self) -> String {
        match (&self.credential, self.role) {
            (Credential::ApiKey { id }, _) => format!("api-key:{id}"),
            (Credential::Token { subject }, _) => format!("oauth:{subject}"),
            (Credential::Local, Role::Agent) => "stdio client".to_owned(),
            (Credential::Local, _) => "local operator".to_owned(),
        }
    }

    /// What this principal reads of its org's log: an agent, only the sessions that belong to
    /// it (those it opened, its runs); an approver or an admin, the whole org.
    pub fn reader(&self) -> undolog_engine::Reader {
        match self.role {
            Role::Agent => undolog_engine::Reader::Caller(self.actor()),
            Role::Approver | Role::Admin => undolog_engine::Reader::Org,
        }
    }

    /// The key that proved this principal, if a key did.
    pub fn key_id(&self) -> Option<&str> {
        match &self.credential {
            Credential::ApiKey { id } => Some(id),
            _ => None,
        }
    }

    /// Whether this is open mode's local operator (the one person of a gateway without keys).
    pub fn is_local_operator(&self) -> bool {
        self.credential == Credential::Local && self.role == Role::Admin
    }

    /// Refuses (403) unless this principal's role includes `needed`; `action` says what was
    /// asked, for the message.
    pub(crate) fn require(&self, needed: Role, action: &str) -> Result<(), Error> {
        if self.role.includes(needed) {
            return Ok(());
        }
        let how = match self.credential {
            Credential::Token { .. } => format!(
                "sign in with a token that grants the {needed} role's scope (or use a key made \
                 with `undolog keys create --org {} --role {needed}`)",
                self.org
            ),
            _ => format!(
                "use a key with that role (an admin makes one with `undolog keys create --org {} \
                 --role {needed}`)",
                self.org
            ),
        };
        Err(Error::RoleMissing {
            needed,
            message: format!(
                "{action} needs the {needed} role, and {} is an {}: {how}",
                self.actor(),
                self.role,
            ),
        })
    }
}

/// How every API key begins; an access token never does.
const KEY_PREFIX: &str = "ul_";

/// A newly made key: the secret is shown once and never stored.
#[derive(Debug)]
pub struct NewKey {
    pub id: String,
    pub org: OrgId,
    pub role: Role,
    pub secret: String,
}

/// Makes a key for `org` with `role` and stores its hash.
pub async fn create_key(
    store: &dyn Store,
    org: OrgId,
    role: Role,
    label: Option<String>,
) -> Result<NewKey, Error> {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let id = hex(&bytes[..4]);
    let secret = format!("{KEY_PREFIX}{id}_{}", hex(&bytes[4..]));
    let key = ApiKey {
        id: id.clone(),
        org: org.clone(),
        hash: hash(&secret),
        role,
        label,
        created_at: Timestamp::now(),
        revoked_at: None,
    };
    store
        .insert_api_key(&key)
        .await
        .map_err(|e| Error::Startup(format!("cannot store the key: {e}")))?;
    Ok(NewKey {
        id,
        org,
        role,
        secret,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hash(secret: &str) -> String {
    blake3::hash(secret.as_bytes()).to_hex().to_string()
}

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
                        crate::oauth::Refusal::Invalid(why) => Error::InvalidToken(why),
                        crate::oauth::Refusal::NoRole(why) => Error::RoleMissing {
                            needed: Role::Agent,
                            message: why,
                        },
                    })?
            }
            (Some(secret), _) => self.principal_of_key(secret).await?,
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

    /// The org and role of a key. Known keys are remembered for [`KEY_CACHE_TTL`], so a request
    /// costs no store read (and a revocation takes up to that long to reach this gateway); an
    /// unknown or revoked key is looked up every time.
    async fn principal_of_key(&self, secret: &str) -> Result<Principal, Error> {
        let hash = hash(secret);
        if let Some(principal) = self.key_cache.get(&hash) {
            return Ok(principal);
        }
        let Some(store) = &self.store else {
            return Err(Error::Unauthorized("this gateway keeps no keys".into()));
        };
        let key = store
            .api_key_by_hash(&hash)
            .await
            .map_err(|e| Error::Engine(e.into()))?
            .ok_or_else(|| {
                Error::Unauthorized(
                    "this API key is not known; create one with `undolog keys create --org NAME`"
                        .into(),
                )
            })?;
        if let Some(at) = key.revoked_at {
            return Err(Error::Unauthorized(format!(
                "this API key ({}) was revoked at {at}; ask an admin of org {} for a new one",
                key.id, key.org
            )));
        }
        let principal = Principal {
            org: key.org,
            role: key.role,
            credential: Credential::ApiKey { id: key.id },
            presented: Presented::default(),
        };
        self.key_cache.put(hash, principal.clone());
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
/// ([`crate::oauth::login`]).
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
            match oauth.logins.signed_in(request.method(), request.headers()) {
                Some(signed_in) => signed_in,
                None => gateway.authenticate(request.headers()).await,
            }
        }
        (None, _) => gateway.authenticate(request.headers()).await,
    };
    let (principal, mut response) = match authenticated {
        Ok(principal) => {
            request.extensions_mut().insert(principal.clone());
            let answered = presenting(principal.presented.clone(), next.run(request));
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

/// How long a verified key is trusted without asking the store again.
pub(crate) const KEY_CACHE_TTL: Duration = Duration::from_secs(30);

/// How long "no key exists" is believed without asking the store again.
pub(crate) const OPEN_MODE_RECHECK: Duration = Duration::from_secs(1);

/// Verified keys, by hash, and whether any key exists.
#[derive(Debug, Default)]
pub(crate) struct KeyCache {
    verified: Mutex<HashMap<String, (Principal, Instant)>>,
    keys_exist: AtomicBool,
    open_seen_at: Mutex<Option<Instant>>,
}

impl KeyCache {
    fn get(&self, hash: &str) -> Option<Principal> {
        let verified = self.verified.lock().expect("key cache lock");
        verified
            .get(hash)
            .filter(|(_, at)| at.elapsed() < KEY_CACHE_TTL)
            .map(|(principal, _)| principal.clone())
    }

    fn put(&self, hash: String, principal: Principal) {
        let mut verified = self.verified.lock().expect("key cache lock");
        verified.retain(|_, (_, at)| at.elapsed() < KEY_CACHE_TTL);
        verified.insert(hash, (principal, Instant::now()));
        self.note_keys_exist();
    }

    fn keys_exist(&self) -> bool {
        self.keys_exist.load(Ordering::Relaxed)
    }

    fn note_keys_exist(&self) {
        self.keys_exist.store(true, Ordering::Relaxed);
    }

    fn recently_open(&self) -> bool {
        let seen = self.open_seen_at.lock().expect("key cache lock");
        seen.is_some_and(|at| at.elapsed() < OPEN_MODE_RECHECK)
    }

    fn note_open(&self) {
        *self.open_seen_at.lock().expect("key cache lock") = Some(Instant::now());
    }
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
    let signed_in = gateway.oauth.as_ref().is_some_and(|o| {
        matches!(
            o.logins.signed_in(&axum::http::Method::GET, &headers),
            Some(Ok(_))
        )
    });
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
        (Some(oauth), false) => oauth.logins.csrf(&headers),
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
