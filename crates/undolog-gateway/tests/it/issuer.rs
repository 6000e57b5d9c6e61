//! An authorization server for the tests that need tokens in process: it publishes RFC 8414
//! metadata and a JWKS over real HTTP, with real ES256 and RS256 keys, and mints the tokens a
//! test asks for (good ones and each kind of bad one). No login: the end-to-end flows run
//! against the npm `oidc-provider` (tests/fixtures/oidc_provider.mjs); this one is for tables.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{SystemTime, UNIX_EPOCH},
};

use aws_lc_rs::{
    encoding::AsDer,
    rsa::{KeyPair as RsaKeyPair, KeySize},
    signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair},
};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header, jwk::Jwk};
use serde_json::{Value, json};

/// A signing key and its public JWK.
#[derive(Clone)]
pub(crate) struct SigningKey {
    pub(crate) kid: String,
    pub(crate) algorithm: Algorithm,
    key: EncodingKey,
    pub(crate) jwk: Value,
}

impl SigningKey {
    pub(crate) fn es256(kid: &str) -> SigningKey {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let key = EncodingKey::from_ec_der(pair.to_pkcs8v1().unwrap().as_ref());
        SigningKey::new(kid, Algorithm::ES256, key)
    }

    pub(crate) fn rs256(kid: &str) -> SigningKey {
        let pair = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let der = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&pair).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(der.as_ref())
        );
        let key = EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap();
        SigningKey::new(kid, Algorithm::RS256, key)
    }

    fn new(kid: &str, algorithm: Algorithm, key: EncodingKey) -> SigningKey {
        let mut jwk = Jwk::from_encoding_key(&key, algorithm).unwrap();
        jwk.common.key_id = Some(kid.to_owned());
        SigningKey {
            kid: kid.to_owned(),
            algorithm,
            key,
            jwk: serde_json::to_value(jwk).unwrap(),
        }
    }

    /// `claims` signed with this key, its kid in the header.
    pub(crate) fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.algorithm);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key).unwrap()
    }
}

/// This gateway's client at the issuer's introspection endpoint, and its secret.
pub(crate) const INTROSPECTION_CLIENT: &str = "undolog-gateway";
pub(crate) const INTROSPECTION_SECRET: &str = "introspection secret";

pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The issuer: its URL, the keys it publishes (a test may rotate them) and the one it signs with.
pub(crate) struct TestIssuer {
    pub(crate) url: String,
    published: Arc<Mutex<Vec<Value>>>,
    pub(crate) es256: SigningKey,
    pub(crate) rs256: SigningKey,
    /// How many times the JWKS was fetched.
    fetches: Arc<Mutex<u32>>,
    /// Opaque tokens and what introspection answers for each.
    opaque: Arc<Mutex<HashMap<String, Value>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl TestIssuer {
    pub(crate) async fn start() -> TestIssuer {
        let (es256, rs256) = (SigningKey::es256("ec-1"), SigningKey::rs256("rsa-1"));
        let published = Arc::new(Mutex::new(vec![es256.jwk.clone(), rs256.jwk.clone()]));
        let fetches = Arc::new(Mutex::new(0));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let metadata = json!({
            "issuer": url,
            "jwks_uri": format!("{url}/jwks"),
            "authorization_endpoint": format!("{url}/authorize"),
            "token_endpoint": format!("{url}/token"),
            "introspection_endpoint": format!("{url}/introspect"),
        });
        let (keys, counter) = (published.clone(), fetches.clone());
        let opaque: Arc<Mutex<HashMap<String, Value>>> = Arc::default();
        let known = opaque.clone();
        let app = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                axum::routing::get(move || async move { axum::Json(metadata) }),
            )
            .route(
                "/jwks",
                axum::routing::get(move || async move {
                    *counter.lock().unwrap() += 1;
                    let keys = keys.lock().unwrap().clone();
                    axum::Json(json!({ "keys": keys }))
                }),
            )
            .route(
                "/introspect",
                axum::routing::post(
                    move |headers: axum::http::HeaderMap, body: String| async move {
                        let client = base64::engine::general_purpose::STANDARD
                            .encode(format!("{INTROSPECTION_CLIENT}:{INTROSPECTION_SECRET}"));
                        let authorized = headers
                            .get("authorization")
                            .is_some_and(|v| v.to_str().unwrap() == format!("Basic {client}"));
                        if !authorized {
                            return (
                                axum::http::StatusCode::UNAUTHORIZED,
                                axum::Json(json!({"error": "invalid_client"})),
                            );
                        }
                        let token = url::form_urlencoded::parse(body.as_bytes())
                            .find(|(k, _)| k == "token")
                            .map(|(_, v)| v.into_owned())
                            .unwrap_or_default();
                        let answer = known.lock().unwrap().get(&token).cloned();
                        (
                            axum::http::StatusCode::OK,
                            axum::Json(answer.unwrap_or(json!({"active": false}))),
                        )
                    },
                ),
            );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        TestIssuer {
            url,
            published,
            es256,
            rs256,
            fetches,
            opaque,
            _stop: stop,
        }
    }

    /// The `[oauth]` section of a gateway at `resource` that takes this issuer's tokens.
    pub(crate) fn config(&self, resource: &str) -> String {
        format!(
            "[oauth]\nissuer = \"{}\"\nresource = \"{resource}\"\n",
            self.url
        )
    }

    /// Claims of a good token for `resource`: subject, org and scope as given, five minutes left.
    pub(crate) fn claims(&self, resource: &str, subject: &str, org: &str, scope: &str) -> Value {
        json!({
            "iss": self.url,
            "aud": resource,
            "sub": subject,
            "org": org,
            "scope": scope,
            "iat": now(),
            "exp": now() + 300,
        })
    }

    /// The `[oauth]` section with introspection as this issuer's client (`secret` its secret).
    pub(crate) fn config_with_introspection(&self, resource: &str, secret: &str) -> String {
        format!(
            "{}introspection_client_id = \"{INTROSPECTION_CLIENT}\"\nintrospection_client_secret = \"{secret}\"\n",
            self.config(resource)
        )
    }

    /// A new opaque token, for which introspection answers `answer`.
    pub(crate) fn opaque(&self, answer: Value) -> String {
        let mut bytes = [0u8; 24];
        aws_lc_rs::rand::fill(&mut bytes).unwrap();
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        self.opaque.lock().unwrap().insert(token.clone(), answer);
        token
    }

    /// Publishes `keys` instead of what was published (a rotation).
    pub(crate) fn publish(&self, keys: &[&SigningKey]) {
        *self.published.lock().unwrap() = keys.iter().map(|k| k.jwk.clone()).collect();
    }

    pub(crate) fn fetches(&self) -> u32 {
        *self.fetches.lock().unwrap()
    }
}
