//! Credentials: API keys per org, stored as BLAKE3 hashes, sent as `Authorization: Bearer`.
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

use crate::{Error, Gateway};

/// Who a request acts for: its org, who it is, and what its role allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub org: OrgId,
    /// The key that proved it; none for the local operator and the stdio client.
    pub key_id: Option<String>,
    pub role: Role,
}

impl Principal {
    /// Open mode's only principal: the person at this machine, with every right.
    pub fn open() -> Principal {
        Principal {
            org: OrgId::new("default").expect("a valid org name"),
            key_id: None,
            role: Role::Admin,
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
        match (&self.key_id, self.role) {
            (Some(id), _) => format!("api-key:{id}"),
            (None, Role::Agent) => "stdio client".to_owned(),
            (None, _) => "local operator".to_owned(),
        }
    }

    /// Whether this is open mode's local operator (the one person of a gateway without keys).
    pub fn is_local_operator(&self) -> bool {
        self.key_id.is_none() && self.role == Role::Admin
    }

    /// Refuses (403) unless this principal's role includes `needed`; `action` says what was
    /// asked, for the message.
    pub(crate) fn require(&self, needed: Role, action: &str) -> Result<(), Error> {
        if self.role.includes(needed) {
            return Ok(());
        }
        Err(Error::Forbidden(format!(
            "{action} needs the {needed} role, and {} is an {}: use a key with that role (an \
             admin makes one with `undolog keys create --org {} --role {needed}`)",
            self.actor(),
            self.role,
            self.org
        )))
    }
}

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
    let secret = format!("ul_{id}_{}", hex(&bytes[4..]));
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
        let bearer = headers
            .get(header::AUTHORIZATION)
            .map(|v| {
                v.to_str()
                    .ok()
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::trim)
                    .ok_or_else(|| {
                        Error::Unauthorized(
                            "the Authorization header must be `Bearer <API key>`".into(),
                        )
                    })
            })
            .transpose()?;
        let principal = match bearer {
            Some(secret) => self.principal_of_key(secret).await?,
            None if self.open_mode().await? => Principal::open(),
            None => {
                return Err(Error::Unauthorized(
                    "this gateway needs an API key: send `Authorization: Bearer <key>`".into(),
                ));
            }
        };
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

    /// The org and role of a key. Known keys are remembered for [`KEY_CACHE_TTL`], so a request
    /// costs no store read (and a revocation takes up to that long to reach this gateway); an
    /// unknown or revoked key is looked up every time.
    async fn principal_of_key(&self, secret: &str) -> Result<Principal, Error> {
        let hash = hash(secret);
        if let Some(principal) = self.key_cache.get(&hash) {
            return Ok(principal);
        }
        let key = self
            .store
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
            key_id: Some(key.id),
            role: key.role,
        };
        self.key_cache.put(hash, principal.clone());
        Ok(principal)
    }

    /// Open mode: no key exists yet. While open, the store is asked again at most every
    /// [`OPEN_MODE_RECHECK`], so a key made by another process closes it within that; keys are
    /// never deleted, so once one is seen the answer is kept.
    async fn open_mode(&self) -> Result<bool, Error> {
        if self.key_cache.keys_exist() {
            return Ok(false);
        }
        if self.key_cache.recently_open() {
            return Ok(true);
        }
        let exist = self
            .store
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

/// Axum middleware: puts the caller's [`Principal`] into the request, or answers 401/403.
///
/// `GET /events` also takes the key as `?access_token=<key>`, because a browser's `EventSource`
/// cannot send headers; no other route does, so keys stay out of URLs everywhere else.
pub(crate) async fn require_principal(
    State(gateway): State<Arc<Gateway>>,
    mut request: Request,
    next: Next,
) -> Response {
    let authenticated = match query_token(&request) {
        Some(token) => {
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
        None => gateway.authenticate(request.headers()).await,
    };
    match authenticated {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(e) => {
            let mut response = e.into_response();
            if response.status() == axum::http::StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    axum::http::HeaderValue::from_static("Bearer realm=\"undolog\""),
                );
            }
            response
        }
    }
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

/// Whether requests need a key now: the dashboard asks before it calls anything, so a person is
/// asked for a key instead of seeing failed requests.
pub(crate) async fn mode(State(gateway): State<Arc<Gateway>>) -> Response {
    match gateway.open_mode().await {
        Ok(open) => axum::Json(serde_json::json!({ "api_key_required": !open })).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Who the credentials are: the org, key id and role, for the dashboard's header and the CLI.
pub(crate) async fn whoami(axum::Extension(principal): axum::Extension<Principal>) -> Response {
    axum::Json(serde_json::json!({
        "org": principal.org,
        "key_id": principal.key_id,
        "role": principal.role,
        "principal": principal.actor(),
    }))
    .into_response()
}
