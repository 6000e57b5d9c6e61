//! `[oauth]`: from [`RawOAuth`] to [`OAuthSettings`]. The gateway is then an OAuth 2.1 resource
//! server (the MCP authorization spec): it takes the authorization server's access tokens beside
//! its own API keys.

use std::time::Duration;

use undolog_types::OrgId;
use url::Url;

use super::{Error, Secret, raw::RawOAuth};

/// The validated `[oauth]` section.
#[derive(Debug, Clone)]
pub struct OAuthSettings {
    /// The authorization server's issuer identifier, exactly as tokens carry it in `iss`.
    pub issuer: String,
    /// This gateway's resource URL: the audience every token must name (RFC 8707).
    pub resource: Url,
    /// The issuer's key set; `None`: read from the issuer's metadata.
    pub jwks_uri: Option<Url>,
    pub algorithms: Vec<jsonwebtoken::Algorithm>,
    pub org_claim: String,
    /// The org of a token without `org_claim`; `None`: such a token is refused.
    pub org: Option<OrgId>,
    pub scopes: RoleScopes,
    pub leeway: Duration,
    /// The dashboard's sign-in; `None`: the dashboard asks for an API key or a token.
    pub dashboard: Option<DashboardClient>,
    /// How to ask about tokens that are not JWTs (RFC 7662); `None`: such tokens are refused.
    pub introspection: Option<IntrospectionClient>,
}

/// The gateway as a client of the authorization server's introspection endpoint.
#[derive(Debug, Clone)]
pub struct IntrospectionClient {
    /// `None`: the issuer's metadata names it.
    pub endpoint: Option<Url>,
    pub client_id: String,
    pub client_secret: Secret,
}

/// The scope that grants each role; a token's role is the highest it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleScopes {
    pub agent: String,
    pub approver: String,
    pub admin: String,
}

/// The dashboard as a client of the authorization server (authorization code with PKCE).
#[derive(Debug, Clone)]
pub struct DashboardClient {
    pub client_id: String,
    /// For a confidential client; a public one relies on PKCE alone.
    pub client_secret: Option<Secret>,
}

pub(super) fn oauth(raw: RawOAuth) -> Result<OAuthSettings, Error> {
    let key = |field: &str| format!("oauth.{field}");
    let issuer = raw
        .issuer
        .ok_or_else(|| Error::key(key("issuer"), "is missing; write the authorization server's issuer URL, as its tokens carry it in `iss`"))?;
    url(&key("issuer"), &issuer)?;
    let resource_text = raw.resource.ok_or_else(|| {
        Error::key(
            key("resource"),
            "is missing; write this gateway's MCP URL as clients reach it, such as \
             https://gateway.example.com/mcp (tokens must name it as their audience)",
        )
    })?;
    let resource = url(&key("resource"), &resource_text)?;
    if resource.fragment().is_some() {
        return Err(Error::key(
            key("resource"),
            "has a fragment; a resource URL has none (RFC 8707)",
        ));
    }
    let jwks_uri = raw
        .jwks_uri
        .map(|text| url(&key("jwks_uri"), &text))
        .transpose()?;
    let algorithms = match raw.algorithms {
        None => vec![
            jsonwebtoken::Algorithm::RS256,
            jsonwebtoken::Algorithm::ES256,
        ],
        Some(names) if names.is_empty() => {
            return Err(Error::key(
                key("algorithms"),
                "is empty; list RS256, ES256 or both",
            ));
        }
        Some(names) => names
            .iter()
            .map(|name| match name.as_str() {
                "RS256" => Ok(jsonwebtoken::Algorithm::RS256),
                "ES256" => Ok(jsonwebtoken::Algorithm::ES256),
                other => Err(Error::key(
                    key("algorithms"),
                    format!("{other:?} is not taken; use \"RS256\" or \"ES256\""),
                )),
            })
            .collect::<Result<_, _>>()?,
    };
    let org = raw
        .org
        .map(|name| OrgId::new(&name).map_err(|e| Error::key(key("org"), format!("{name:?}: {e}"))))
        .transpose()?;
    let scope = |field: &str, given: Option<String>, default: &str| {
        let scope = given.unwrap_or_else(|| default.to_owned());
        if scope.is_empty() || scope.contains(char::is_whitespace) {
            return Err(Error::key(
                key(field),
                format!("{scope:?} is not one scope; write a single word such as {default:?}"),
            ));
        }
        Ok(scope)
    };
    let scopes = RoleScopes {
        agent: scope("agent_scope", raw.agent_scope, "undolog:agent")?,
        approver: scope("approver_scope", raw.approver_scope, "undolog:approve")?,
        admin: scope("admin_scope", raw.admin_scope, "undolog:admin")?,
    };
    if scopes.agent == scopes.approver
        || scopes.agent == scopes.admin
        || scopes.approver == scopes.admin
    {
        return Err(Error::key(
            "oauth",
            "two roles share a scope; give agent_scope, approver_scope and admin_scope one each",
        ));
    }
    let dashboard = match (raw.dashboard_client_id, raw.dashboard_client_secret) {
        (None, None) => None,
        (None, Some(_)) => {
            return Err(Error::key(
                key("dashboard_client_secret"),
                "is set without dashboard_client_id; add the client id the authorization server \
                 gave the dashboard",
            ));
        }
        (Some(client_id), secret) => Some(DashboardClient {
            client_id,
            client_secret: secret.map(Secret),
        }),
    };
    let introspection = match (
        raw.introspection_client_id,
        raw.introspection_client_secret,
        raw.introspection_endpoint,
    ) {
        (None, None, None) => None,
        (Some(client_id), Some(secret), endpoint) => Some(IntrospectionClient {
            endpoint: endpoint
                .map(|text| url(&key("introspection_endpoint"), &text))
                .transpose()?,
            client_id,
            client_secret: Secret(secret),
        }),
        (Some(_), None, _) => {
            return Err(Error::key(
                key("introspection_client_secret"),
                "is missing; introspection needs the secret the authorization server gave \
                 this gateway's client",
            ));
        }
        (None, _, _) => {
            return Err(Error::key(
                key("introspection_client_id"),
                "is missing; name the client the authorization server registered for this \
                 gateway's introspection requests",
            ));
        }
    };
    Ok(OAuthSettings {
        introspection,
        issuer,
        resource,
        jwks_uri,
        algorithms,
        org_claim: raw.org_claim.unwrap_or_else(|| "org".to_owned()),
        org,
        scopes,
        leeway: Duration::from_secs(raw.leeway_secs.unwrap_or(30)),
        dashboard,
    })
}

fn url(key: &str, text: &str) -> Result<Url, Error> {
    let url =
        Url::parse(text).map_err(|e| Error::key(key, format!("{text:?} is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(Error::key(
            key,
            format!("{text:?} is not an http(s) URL with a host"),
        ));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use crate::GatewayConfig;

    const GOOD: &str =
        "issuer = \"https://idp.example.com\"\nresource = \"https://gw.example.com/mcp\"\n";

    #[test]
    fn an_oauth_section_that_cannot_work_is_refused_with_the_key_and_the_fix() {
        let cases = [
            (
                "resource = \"https://gw.example.com/mcp\"",
                "`oauth.issuer`: is missing",
            ),
            (
                "issuer = \"https://idp.example.com\"",
                "`oauth.resource`: is missing",
            ),
            (
                "issuer = \"idp\"\nresource = \"https://gw/mcp\"",
                "`oauth.issuer`: \"idp\" is not a URL",
            ),
            (
                "issuer = \"https://idp\"\nresource = \"ftp://gw/mcp\"",
                "`oauth.resource`: \"ftp://gw/mcp\" is not an http(s) URL",
            ),
            (
                "issuer = \"https://idp\"\nresource = \"https://gw/mcp#x\"",
                "has a fragment",
            ),
            (
                &format!("{GOOD}algorithms = [\"HS256\"]"),
                "\"HS256\" is not taken",
            ),
            (
                &format!("{GOOD}algorithms = []"),
                "`oauth.algorithms`: is empty",
            ),
            (&format!("{GOOD}agent_scope = \"a b\""), "is not one scope"),
            (
                &format!("{GOOD}approver_scope = \"undolog:agent\""),
                "two roles share a scope",
            ),
            (&format!("{GOOD}org = \"\""), "`oauth.org`"),
            (
                &format!("{GOOD}dashboard_client_secret = \"s\""),
                "without dashboard_client_id",
            ),
            (
                &format!("{GOOD}introspection_client_id = \"gw\""),
                "`oauth.introspection_client_secret`: is missing",
            ),
            (
                &format!("{GOOD}introspection_endpoint = \"https://idp/introspect\""),
                "`oauth.introspection_client_id`: is missing",
            ),
        ];
        for (section, want) in cases {
            let text = format!("[oauth]\n{section}\n");
            let error = GatewayConfig::from_toml(&text)
                .expect_err(section)
                .to_string();
            assert!(error.contains(want), "{section}: {error}");
        }
        let config = GatewayConfig::from_toml(&format!("[oauth]\n{GOOD}")).unwrap();
        let oauth = config.oauth.expect("an oauth section");
        assert_eq!(oauth.resource.as_str(), "https://gw.example.com/mcp");
        assert_eq!(oauth.scopes.approver, "undolog:approve");
        assert!(oauth.dashboard.is_none());
    }
}
