//! `[[notify]]`: where a held call is announced (a signed webhook, a Slack incoming webhook, or
//! email over SMTP), and the `[approvals]` keys its links need, checked.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Error, Secret};

/// One `[[notify]]` entry as written.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNotify {
    /// Names the target in delivery records and in the channel a decision came through
    /// (`link:NAME`); `KIND-N` by default.
    pub(crate) name: Option<String>,
    /// `webhook`, `slack` or `email`.
    pub(crate) kind: Option<String>,
    /// webhook, slack: where the JSON is POSTed.
    pub(crate) url: Option<String>,
    /// webhook: the shared secret each delivery is signed with (HMAC-SHA256).
    pub(crate) secret: Option<String>,
    /// email: the SMTP server, `smtp://HOST:PORT` (`?tls=required` for STARTTLS) or
    /// `smtps://HOST:PORT`, with `USER:PASSWORD@` when it asks for them.
    pub(crate) smtp: Option<String>,
    /// email: the sender, `UndoLog <undolog@example.com>`.
    pub(crate) from: Option<String>,
    /// email: the recipients.
    pub(crate) to: Option<Vec<String>>,
}

/// Where held calls are announced, in escalation order.
#[derive(Debug, Clone, PartialEq)]
pub struct NotifyTarget {
    pub name: String,
    pub channel: Channel,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Channel {
    /// A JSON POST signed with `UndoLog-Signature: t=UNIX,v1=HEX(HMAC-SHA256(secret, "t.body"))`.
    Webhook { url: String, secret: Secret },
    /// A Slack incoming webhook: a Block Kit message.
    Slack { url: String },
    /// A plain-text email through SMTP.
    Email {
        smtp: Secret,
        from: String,
        to: Vec<String>,
    },
}

impl Channel {
    pub fn kind(&self) -> &'static str {
        match self {
            Channel::Webhook { .. } => "webhook",
            Channel::Slack { .. } => "slack",
            Channel::Email { .. } => "email",
        }
    }
}

/// Whether `name` may name a target: 1 to 64 letters, digits, `-` or `_` (it goes into
/// `decided_via` as `link:NAME`).
pub fn is_target_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
}

/// The shortest link secret taken: 32 bytes, as for an HMAC-SHA256 key.
const LINK_SECRET_MIN: usize = 32;

pub(super) fn targets(raw: &[RawNotify]) -> Result<Vec<NotifyTarget>, Error> {
    let mut targets: Vec<NotifyTarget> = Vec::new();
    for (i, entry) in raw.iter().enumerate() {
        let key = |field: &str| format!("notify[{i}].{field}");
        let kind = entry.kind.as_deref().ok_or_else(|| {
            Error::key(
                key("kind"),
                "is missing; use \"webhook\", \"slack\" or \"email\"",
            )
        })?;
        let url = || -> Result<String, Error> {
            let url = entry.url.clone().ok_or_else(|| {
                Error::key(
                    key("url"),
                    format!("is missing; a {kind} target POSTs to it"),
                )
            })?;
            match url::Url::parse(&url) {
                Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(url),
                _ => Err(Error::key(
                    key("url"),
                    format!("{url:?} is not an http(s) URL"),
                )),
            }
        };
        let unused = |field: &str, set: bool| -> Result<(), Error> {
            match set {
                true => Err(Error::key(
                    key(field),
                    format!("means nothing to a {kind} target"),
                )),
                false => Ok(()),
            }
        };
        let channel = match kind {
            "webhook" => {
                let secret = entry
                    .secret
                    .clone()
                    .filter(|s| s.len() >= 16)
                    .ok_or_else(|| {
                        Error::key(
                            key("secret"),
                            "must be set, 16 characters or more: the receiver checks each \
                         delivery's signature with it",
                        )
                    })?;
                email_fields_unused(entry, &unused)?;
                Channel::Webhook {
                    url: url()?,
                    secret: Secret(secret),
                }
            }
            "slack" => {
                unused("secret", entry.secret.is_some())?;
                email_fields_unused(entry, &unused)?;
                Channel::Slack { url: url()? }
            }
            "email" => {
                unused("url", entry.url.is_some())?;
                unused("secret", entry.secret.is_some())?;
                email(entry, &key)?
            }
            other => {
                return Err(Error::key(
                    key("kind"),
                    format!("{other:?} is not a kind; use \"webhook\", \"slack\" or \"email\""),
                ));
            }
        };
        let name = entry.name.clone().unwrap_or_else(|| format!("{kind}-{i}"));
        if !is_target_name(&name) {
            return Err(Error::key(
                key("name"),
                format!("{name:?}: use 1 to 64 letters, digits, '-' or '_'"),
            ));
        }
        if targets.iter().any(|t| t.name == name) {
            return Err(Error::key(
                key("name"),
                format!("{name:?} names another target too"),
            ));
        }
        targets.push(NotifyTarget { name, channel });
    }
    Ok(targets)
}

fn email_fields_unused(
    entry: &RawNotify,
    unused: &dyn Fn(&str, bool) -> Result<(), Error>,
) -> Result<(), Error> {
    unused("smtp", entry.smtp.is_some())?;
    unused("from", entry.from.is_some())?;
    unused("to", entry.to.is_some())
}

fn email(entry: &RawNotify, key: &dyn Fn(&str) -> String) -> Result<Channel, Error> {
    let smtp = entry.smtp.clone().ok_or_else(|| {
        Error::key(
            key("smtp"),
            "is missing; write smtp://HOST:PORT or smtps://HOST:PORT",
        )
    })?;
    if let Err(e) =
        lettre::AsyncSmtpTransport::<lettre::Tokio1Executor>::from_url(&smtp).map(|_| ())
    {
        return Err(Error::key(
            key("smtp"),
            format!("is not an SMTP URL ({e}); write smtp://HOST:PORT or smtps://HOST:PORT"),
        ));
    }
    let mailbox = |field: &str, text: &str| -> Result<String, Error> {
        text.parse::<lettre::message::Mailbox>()
            .map(|_| text.to_owned())
            .map_err(|e| Error::key(key(field), format!("{text:?} is not an address ({e})")))
    };
    let from = entry
        .from
        .as_deref()
        .ok_or_else(|| Error::key(key("from"), "is missing; the sender's address"))?;
    let to = entry.to.clone().unwrap_or_default();
    if to.is_empty() {
        return Err(Error::key(
            key("to"),
            "is missing or empty; list the recipients",
        ));
    }
    Ok(Channel::Email {
        smtp: Secret(smtp),
        from: mailbox("from", from)?,
        to: to
            .iter()
            .map(|address| mailbox("to", address))
            .collect::<Result<_, _>>()?,
    })
}

/// `[approvals] public_url`: where a person's browser reaches this gateway, the base of every
/// link a notification carries.
pub(super) fn public_url(raw: Option<&str>, listen: &str) -> Result<String, Error> {
    let Some(text) = raw else {
        return Ok(format!("http://{listen}"));
    };
    match url::Url::parse(text) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.query().is_none() => {
            Ok(text.trim_end_matches('/').to_owned())
        }
        _ => Err(Error::key(
            "approvals.public_url",
            format!(
                "{text:?} is not an http(s) URL without a query, such as https://undolog.example.com"
            ),
        )),
    }
}

/// `[approvals] link_secret`: the key approve and deny links are signed with.
pub(super) fn link_secret(raw: Option<&str>) -> Result<Option<Secret>, Error> {
    match raw {
        None => Ok(None),
        Some(text) if text.len() >= LINK_SECRET_MIN => Ok(Some(Secret(text.to_owned()))),
        Some(_) => Err(Error::key(
            "approvals.link_secret",
            format!(
                "is shorter than {LINK_SECRET_MIN} characters; make one with \
                 `openssl rand -hex 32`"
            ),
        )),
    }
}

/// `[approvals] escalate_after_secs`: a held call nobody decided is announced to the next target.
pub(super) fn escalate_after(raw: Option<u64>) -> Result<Option<Duration>, Error> {
    match raw {
        None => Ok(None),
        Some(0) => Err(Error::key(
            "approvals.escalate_after_secs",
            "must be greater than zero (leave it out to notify every target at once)",
        )),
        Some(secs) => Ok(Some(Duration::from_secs(secs))),
    }
}
