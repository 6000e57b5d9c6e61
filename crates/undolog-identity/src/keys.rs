//! API keys: made here, stored as hashes, and remembered once checked.

use std::{
    collections::HashMap,
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use rand::RngCore;
use undolog_store::{ApiKey, Store};
use undolog_types::{OrgId, Role, Timestamp};

use crate::{Credential, Error, Presented, Principal};

/// How every API key begins; an access token never does.
pub const KEY_PREFIX: &str = "ul_";

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
        .map_err(Error::KeyNotStored)?;
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

/// What the store keeps of a key (and the caches remember a credential by): its BLAKE3 hash.
pub fn hash(secret: &str) -> String {
    blake3::hash(secret.as_bytes()).to_hex().to_string()
}

/// The org and role of a key. Known keys are remembered for [`KEY_CACHE_TTL`], so a request
/// costs no store read (and a revocation takes up to that long to reach this gateway); an
/// unknown or revoked key is looked up every time.
pub async fn key_principal(
    store: Option<&dyn Store>,
    cache: &KeyCache,
    secret: &str,
) -> Result<Principal, Error> {
    let hash = hash(secret);
    if let Some(principal) = cache.get(&hash) {
        return Ok(principal);
    }
    let Some(store) = store else {
        return Err(Error::Unauthorized("this gateway keeps no keys".into()));
    };
    let key = store
        .api_key_by_hash(&hash)
        .await
        .map_err(Error::Store)?
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
    cache.put(hash, principal.clone());
    Ok(principal)
}

/// How long a verified key is trusted without asking the store again.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(30);

/// How long "no key exists" is believed without asking the store again.
pub const OPEN_MODE_RECHECK: Duration = Duration::from_secs(1);

/// Verified keys, by hash, and whether any key exists.
#[derive(Debug, Default)]
pub struct KeyCache {
    verified: Mutex<HashMap<String, (Principal, Instant)>>,
    keys_exist: AtomicBool,
    open_seen_at: Mutex<Option<Instant>>,
}

impl KeyCache {
    pub fn get(&self, hash: &str) -> Option<Principal> {
        let verified = self.verified.lock().expect("key cache lock");
        verified
            .get(hash)
            .filter(|(_, at)| at.elapsed() < KEY_CACHE_TTL)
            .map(|(principal, _)| principal.clone())
    }

    pub fn put(&self, hash: String, principal: Principal) {
        let mut verified = self.verified.lock().expect("key cache lock");
        verified.retain(|_, (_, at)| at.elapsed() < KEY_CACHE_TTL);
        verified.insert(hash, (principal, Instant::now()));
        self.note_keys_exist();
    }

    pub fn keys_exist(&self) -> bool {
        self.keys_exist.load(Ordering::Relaxed)
    }

    pub fn note_keys_exist(&self) {
        self.keys_exist.store(true, Ordering::Relaxed);
    }

    pub fn recently_open(&self) -> bool {
        let seen = self.open_seen_at.lock().expect("key cache lock");
        seen.is_some_and(|at| at.elapsed() < OPEN_MODE_RECHECK)
    }

    pub fn note_open(&self) {
        *self.open_seen_at.lock().expect("key cache lock") = Some(Instant::now());
    }
}
