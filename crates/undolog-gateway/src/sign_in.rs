//! The dashboard's sign-in through the authorization server: authorization code with PKCE (S256)
//! and a `state` kept here, then a session cookie (HttpOnly, SameSite=Strict, Secure when the
//! resource is https) that stands for the access token the code was exchanged for. The token is
//! checked like any bearer token, so its scopes decide the role. A request that changes anything
//! with the cookie must also carry the session's CSRF token in `X-UndoLog-CSRF`, which only the
//! dashboard's own page can read (from `GET /v1/whoami`). A sign-in ends only in the browser that
//! began it: its `state` is bound to a cookie set then, so a callback URL sent to someone else
//! (to sign them in as the sender) is refused.
//!
//! Sign-ins live in this process: a gateway restart, or another gateway behind the same name,
//! asks the person to sign in again.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use axum::{
    extract::{Query, State},
    http::{HeaderMap, Method, StatusCode, header},
    response::{Html, IntoResponse, Response},
};
use base64::Engine as _;
use rand::RngCore;
use serde::Deserialize;
use sha2::Digest;

use crate::{Error, Gateway, Principal};

/// The cookie that carries a dashboard session, and its attributes.
pub(crate) const COOKIE: &str = "undolog_session";
const SESSION_ATTRIBUTES: &str = "Path=/; SameSite=Strict";
/// The cookie that ties a sign-in in progress to the browser that began it. SameSite=Lax: it must
/// ride the navigation back from the identity provider.
const LOGIN_COOKIE: &str = "undolog_sign_in";
/// The header an unsafe request with the cookie must carry.
pub(crate) const CSRF_HEADER: &str = "x-undolog-csrf";
/// How long a person has to finish signing in at the authorization server.
const PENDING_FOR: Duration = Duration::from_secs(10 * 60);
/// Above this many sign-ins in progress, the oldest are forgotten.
const PENDING_AT_MOST: usize = 1024;

#[derive(Debug)]
struct Pending {
    verifier: String,
    /// The value of the browser's [`LOGIN_COOKIE`].
    browser: String,
    started: Instant,
}

#[derive(Debug)]
struct Session {
    principal: Principal,
    csrf: String,
    until: Instant,
}

/// Sign-ins in progress (by `state`) and signed-in dashboards (by cookie).
#[derive(Debug, Default)]
pub(crate) struct Logins {
    pending: Mutex<HashMap<String, Pending>>,
    sessions: Mutex<HashMap<String, Session>>,
}

impl Logins {
    /// The principal of a request that carries a session cookie and no other credential;
    /// `None` when it carries no cookie.
    pub(crate) fn signed_in(
        &self,
        method: &Method,
        headers: &HeaderMap,
    ) -> Option<Result<Principal, Error>> {
        let id = cookie(headers)?;
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(session) = sessions.get(&id).filter(|s| s.until > Instant::now()) else {
            return Some(Err(Error::Unauthorized(
                "this dashboard sign-in has ended (expired, signed out, or the gateway \
                 restarted): sign in again"
                    .into(),
            )));
        };
        let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        let csrf = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        if !safe && csrf != Some(session.csrf.as_str()) {
            return Some(Err(Error::Forbidden(format!(
                "a request that changes something with the dashboard's cookie must carry its \
                 {CSRF_HEADER} header (the dashboard sends it; other pages cannot)"
            ))));
        }
        Some(Ok(session.principal.clone()))
    }

    /// The CSRF token of the session `headers` carry, for the dashboard's page.
    pub(crate) fn csrf(&self, headers: &HeaderMap) -> Option<String> {
        let id = cookie(headers)?;
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.get(&id).map(|s| s.csrf.clone())
    }

    /// A new sign-in: its `state`, PKCE verifier, and the browser's cookie value.
    fn start(&self) -> (String, String, String) {
        let (state, verifier, browser) = (random(), random(), random());
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.retain(|_, p| p.started.elapsed() < PENDING_FOR);
        if pending.len() >= PENDING_AT_MOST
            && let Some(oldest) = pending
                .iter()
                .min_by_key(|(_, p)| p.started)
                .map(|(state, _)| state.clone())
        {
            pending.remove(&oldest);
        }
        pending.insert(
            state.clone(),
            Pending {
                verifier: verifier.clone(),
                browser: browser.clone(),
                started: Instant::now(),
            },
        );
        (state, verifier, browser)
    }

    /// The verifier of sign-in `state` when `browser` began it, which ends the sign-in (a
    /// `state` is good once). Another browser's try changes nothing.
    fn finish(&self, state: &str, browser: Option<&str>) -> Option<String> {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let theirs = pending
            .get(state)
            .is_some_and(|p| Some(p.browser.as_str()) == browser);
        if !theirs {
            return None;
        }
        pending
            .remove(state)
            .filter(|p| p.started.elapsed() < PENDING_FOR)
            .map(|p| p.verifier)
    }

    fn open(&self, principal: Principal, until: Instant) -> String {
        let id = random();
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        sessions.retain(|_, s| s.until > now);
        sessions.insert(
            id.clone(),
            Session {
                principal,
                csrf: random(),
                until,
            },
        );
        id
    }

    fn close(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers) {
            let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            sessions.remove(&id);
        }
    }
}

/// 32 random bytes, base64url: a state, a verifier (RFC 7636's 43 characters), a session id.
fn random() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// RFC 7636's S256 challenge of `verifier`.
fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

fn cookie(headers: &HeaderMap) -> Option<String> {
    named_cookie(headers, COOKIE)
}

fn named_cookie(headers: &HeaderMap, wanted: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == wanted).then(|| value.to_owned())
        })
}

/// The resource server's settings, as the sign-in uses them.
mod settings {
    use axum::http::HeaderValue;
    use undolog_identity::oauth::OAuth;

    /// Where the authorization server sends the person back: `/v1/auth/callback` at the
    /// resource's origin.
    pub(super) fn redirect_uri(oauth: &OAuth) -> String {
        let mut url = oauth.settings.resource.clone();
        url.set_path("/v1/auth/callback");
        url.set_query(None);
        url.to_string()
    }

    /// A `Set-Cookie` value: HttpOnly always, Secure when the resource is https, `attributes`
    /// (path, SameSite, lifetime) as given.
    pub(super) fn set_cookie(
        oauth: &OAuth,
        name: &str,
        value: &str,
        attributes: &str,
    ) -> HeaderValue {
        let secure = if oauth.settings.resource.scheme() == "https" {
            "; Secure"
        } else {
            ""
        };
        HeaderValue::from_str(&format!("{name}={value}; HttpOnly; {attributes}{secure}"))
            .expect("cookie values are base64url")
    }

    /// The scopes the dashboard asks for: every role's; the server grants what the person has.
    pub(super) fn dashboard_scopes(oauth: &OAuth) -> String {
        let scopes = &oauth.settings.scopes;
        format!(
            "openid {} {} {}",
            scopes.agent, scopes.approver, scopes.admin
        )
    }
}

/// A page for the person, with what happened and a way back.
fn page(status: StatusCode, message: &str) -> Response {
    let escaped = message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>UndoLog sign-in</title>\
         <p id=message>{escaped}</p><p><a href=\"/\">Back to the dashboard</a></p>"
    );
    (status, Html(body)).into_response()
}

fn sign_in_unavailable() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "This gateway has no sign-in through an identity provider: set oauth.dashboard_client_id, \
         or use an API key.",
    )
}

/// The resource server and the dashboard's client, when the dashboard's sign-in is configured.
fn dashboard(gateway: &Gateway) -> Option<(&crate::oauth::OAuth, &crate::config::DashboardClient)> {
    let oauth = gateway.oauth.as_ref()?;
    Some((oauth, oauth.settings.dashboard.as_ref()?))
}

/// `GET /v1/auth/login`: off to the authorization server's sign-in.
pub(crate) async fn login(State(gateway): State<Arc<Gateway>>) -> Response {
    let Some((oauth, client)) = dashboard(&gateway) else {
        return sign_in_unavailable();
    };
    let endpoint = match oauth.keys.metadata().await {
        Ok(metadata) => metadata.authorization_endpoint.clone(),
        Err(e) => {
            return page(
                StatusCode::BAD_GATEWAY,
                &format!("Sign-in is unavailable: {e}"),
            );
        }
    };
    let Some(mut url) = endpoint else {
        return page(
            StatusCode::BAD_GATEWAY,
            "The authorization server's metadata names no authorization_endpoint.",
        );
    };
    let (state, verifier, browser) = gateway.logins.start();
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &client.client_id)
        .append_pair("redirect_uri", &settings::redirect_uri(oauth))
        .append_pair("scope", &settings::dashboard_scopes(oauth))
        .append_pair("state", &state)
        .append_pair("code_challenge", &challenge(&verifier))
        .append_pair("code_challenge_method", "S256")
        .append_pair("resource", oauth.settings.resource.as_str());
    let cookie = settings::set_cookie(
        oauth,
        LOGIN_COOKIE,
        &browser,
        &format!(
            "Path=/v1/auth; SameSite=Lax; Max-Age={}",
            PENDING_FOR.as_secs()
        ),
    );
    let mut response = (StatusCode::FOUND, [(header::LOCATION, url.to_string())]).into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
}

#[derive(Debug, Deserialize)]
pub(crate) struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

#[derive(Debug, Deserialize)]
struct TokenResponse {
    access_token: String,
}

/// `GET /v1/auth/callback`: the code exchanged for a token, the token checked, the cookie set.
pub(crate) async fn callback(
    State(gateway): State<Arc<Gateway>>,
    Query(callback): Query<Callback>,
    headers: HeaderMap,
) -> Response {
    let Some((oauth, client)) = dashboard(&gateway) else {
        return sign_in_unavailable();
    };
    if let Some(error) = callback.error {
        let why = callback.error_description.unwrap_or_default();
        return page(
            StatusCode::FORBIDDEN,
            &format!("The identity provider did not sign you in: {error} {why}"),
        );
    }
    let browser = named_cookie(&headers, LOGIN_COOKIE);
    let verifier = callback
        .state
        .as_deref()
        .and_then(|s| gateway.logins.finish(s, browser.as_deref()));
    let (Some(code), Some(verifier)) = (callback.code, verifier) else {
        return page(
            StatusCode::BAD_REQUEST,
            "This sign-in is not one this browser started here, or it took too long: sign in \
             again.",
        );
    };
    let token = match exchange(oauth, client, &code, &verifier).await {
        Ok(token) => token,
        Err(e) => return page(StatusCode::BAD_GATEWAY, &format!("Sign-in failed: {e}")),
    };
    let (mut principal, until) = match oauth.verify(&token).await {
        Ok(verified) => verified,
        Err(crate::oauth::Refusal::Invalid(why) | crate::oauth::Refusal::NoRole(why)) => {
            return page(StatusCode::FORBIDDEN, &format!("Sign-in refused: {why}"));
        }
    };
    tracing::info!(principal = %principal.actor(), org = %principal.org, role = %principal.role, "dashboard sign-in");
    // What the cookie stands for, for an engine elsewhere to check as it checks any token.
    let bearer = header::HeaderValue::from_str(&format!("Bearer {token}")).ok();
    principal.presented = undolog_identity::Presented::of(bearer.as_ref());
    let id = gateway.logins.open(principal, until);
    let cookie = settings::set_cookie(oauth, COOKIE, &id, SESSION_ATTRIBUTES);
    // A page, not a redirect: the cookie is SameSite=Strict, and a navigation that began at the
    // identity provider would not send it. The page's own navigation is same-site.
    let mut response = Html(
        "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=\"0;url=/\">\
         <title>Signed in</title><p>Signed in. <a href=\"/\">Open the dashboard</a></p>",
    )
    .into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
}

/// The code and verifier for the access token, at the token endpoint.
async fn exchange(
    oauth: &crate::oauth::OAuth,
    client: &crate::config::DashboardClient,
    code: &str,
    verifier: &str,
) -> Result<String, String> {
    let endpoint = oauth
        .keys
        .metadata()
        .await?
        .token_endpoint
        .clone()
        .ok_or("the authorization server's metadata names no token_endpoint")?;
    let redirect_uri = settings::redirect_uri(oauth);
    let pairs = [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", &redirect_uri),
        ("code_verifier", verifier),
        ("client_id", &client.client_id),
        ("resource", oauth.settings.resource.as_str()),
    ];
    let basic = client
        .client_secret
        .as_ref()
        .map(|secret| (client.client_id.as_str(), secret.0.as_str()));
    let response = oauth.keys.post_form(&endpoint, &pairs, basic).await?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(format!("the token endpoint answered {status}: {body}"));
    }
    let token: TokenResponse = response
        .json()
        .await
        .map_err(|e| format!("the token endpoint's answer has no access_token ({e})"))?;
    Ok(token.access_token)
}

/// `POST /v1/auth/logout`: the session ends here and the cookie is cleared.
pub(crate) async fn logout(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    let Some(oauth) = &gateway.oauth else {
        return StatusCode::NO_CONTENT.into_response();
    };
    gateway.logins.close(&headers);
    let cleared = settings::set_cookie(
        oauth,
        COOKIE,
        "",
        &format!("{SESSION_ATTRIBUTES}; Max-Age=0"),
    );
    (StatusCode::NO_CONTENT, [(header::SET_COOKIE, cleared)]).into_response()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn the_s256_challenge_is_rfc_7636s() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn a_state_is_good_once_and_only_in_the_browser_that_began_it() {
        let logins = Logins::default();
        let (state, verifier, browser) = logins.start();
        assert_eq!(logins.finish(&state, Some(&browser)), Some(verifier));
        assert_eq!(logins.finish(&state, Some(&browser)), None, "used");
        assert_eq!(logins.finish("made-up", Some(&browser)), None);
        let (state, verifier, browser) = logins.start();
        assert_eq!(logins.finish(&state, Some("another browser")), None);
        assert_eq!(logins.finish(&state, None), None, "no cookie");
        assert_eq!(
            logins.finish(&state, Some(&browser)),
            Some(verifier),
            "still its own"
        );
    }

    #[test]
    fn a_cookie_session_needs_its_csrf_token_to_change_anything() {
        let logins = Logins::default();
        let id = logins.open(Principal::stdio(), Instant::now() + Duration::from_secs(60));
        let csrf = logins.sessions.lock().unwrap()[&id].csrf.clone();
        let with = |cookie_value: &str, token: Option<&str>| {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::COOKIE,
                HeaderValue::from_str(&format!("other=1; {COOKIE}={cookie_value}")).unwrap(),
            );
            if let Some(token) = token {
                headers.insert(CSRF_HEADER, HeaderValue::from_str(token).unwrap());
            }
            headers
        };
        let cases: &[(&str, Method, HeaderMap, Option<u16>)] = &[
            ("a read needs no token", Method::GET, with(&id, None), None),
            (
                "a post with the token",
                Method::POST,
                with(&id, Some(&csrf)),
                None,
            ),
            (
                "a post without it",
                Method::POST,
                with(&id, None),
                Some(403),
            ),
            (
                "a post with another",
                Method::POST,
                with(&id, Some("x")),
                Some(403),
            ),
            (
                "an unknown session",
                Method::GET,
                with("nope", None),
                Some(401),
            ),
        ];
        for (what, method, headers, refused) in cases {
            let got = logins
                .signed_in(method, headers)
                .expect("a cookie was sent")
                .map_err(|e| e.into_response().status().as_u16());
            assert_eq!(got.err(), *refused, "{what}");
        }
        assert!(logins.signed_in(&Method::GET, &HeaderMap::new()).is_none());
    }
}
