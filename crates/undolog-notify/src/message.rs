//! What a notification says, in each target's format: the webhook's JSON (and its signature), a
//! Slack Block Kit message, and an email's subject and text. Nothing here does I/O.

use hmac::{KeyInit, Mac};
use serde::Serialize;
use serde_json::{Value, json};
use undolog_types::{ApprovalId, EffectId, OrgId, SessionId, Tier, Timestamp};

/// The header a webhook delivery's signature travels in.
pub(crate) const SIGNATURE_HEADER: &str = "undolog-signature";

/// Arguments longer than this (as JSON) are cut in Slack messages and emails; the webhook's JSON
/// carries them whole.
const ARGUMENTS_SHOWN: usize = 2_000;

/// A held call, as every target is told of it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Notice {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) org: OrgId,
    pub(crate) session: SessionId,
    pub(crate) approval_id: ApprovalId,
    pub(crate) effect_id: EffectId,
    pub(crate) tool: String,
    pub(crate) arguments: Value,
    pub(crate) tier: Tier,
    /// Why the call waits for a person.
    pub(crate) reason: String,
    pub(crate) requested_by: Option<String>,
    pub(crate) requested_at: Timestamp,
    pub(crate) expires_at: Timestamp,
    /// Where to decide; each target gets links of its own.
    pub(crate) links: Links,
    /// 1 for the first targets told, 2 for those told when nobody had decided, and so on.
    pub(crate) escalation: u32,
}

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Links {
    pub(crate) approve: String,
    pub(crate) deny: String,
    pub(crate) dashboard: String,
}

/// `t=UNIX,v1=HEX`: HMAC-SHA256 under `secret` of `"{t}.{body}"`, as Stripe signs webhooks. The
/// receiver recomputes it, compares in constant time, and refuses an old `t` (a replay).
pub(crate) fn signature(secret: &str, unix_secs: i64, body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(format!("{unix_secs}.").as_bytes());
    mac.update(body);
    format!(
        "t={unix_secs},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// The arguments as indented JSON, cut to what a message shows.
fn shown_arguments(arguments: &Value) -> String {
    let text = serde_json::to_string_pretty(arguments).unwrap_or_default();
    if text.len() <= ARGUMENTS_SHOWN {
        return text;
    }
    let mut end = ARGUMENTS_SHOWN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… ({} bytes in all)", &text[..end], text.len())
}

/// `YYYY-MM-DD HH:MM:SS UTC`.
fn when(at: Timestamp) -> String {
    let rfc3339 = at.to_string();
    format!("{} UTC", rfc3339[..19].replacen('T', " ", 1))
}

fn title(notice: &Notice) -> String {
    let again = match notice.escalation {
        1 => String::new(),
        n => format!(" (escalation {n}: nobody has decided yet)"),
    };
    format!(
        "Approval needed: {} in org {}{again}",
        notice.tool, notice.org
    )
}

/// Text of the agent's (arguments, a session id, a tool name) made inert in Slack's `mrkdwn`:
/// `&`, `<` and `>` escaped as Slack asks, so no `<url|label>` link, mention or channel ping
/// forms; and each backtick replaced by the modifier letter grave accent (U+02CB), which looks
/// the same, so no code span or block the message opens can be closed early.
fn mrkdwn(text: &str) -> String {
    let mut inert = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => inert.push_str("&amp;"),
            '<' => inert.push_str("&lt;"),
            '>' => inert.push_str("&gt;"),
            '`' => inert.push('\u{02CB}'),
            c => inert.push(c),
        }
    }
    inert
}

/// A Slack incoming webhook's message: Block Kit, with `text` for notifications and clients that
/// show no blocks. Everything not the gateway's own words goes through [`mrkdwn`].
pub(crate) fn slack(notice: &Notice) -> Value {
    let field =
        |label: &str, value: &str| json!({"type": "mrkdwn", "text": format!("*{label}*\n{value}")});
    let requested_by = notice.requested_by.as_deref().unwrap_or("unknown");
    json!({
        "text": format!("{}: {}", mrkdwn(&title(notice)), notice.links.approve),
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": title(notice)}},
            {"type": "section", "fields": [
                field("Tool", &format!("`{}`", mrkdwn(&notice.tool))),
                field("Tier", notice.tier.as_str()),
                field("Session", &format!("`{}`", mrkdwn(notice.session.as_str()))),
                field("Requested by", &mrkdwn(requested_by)),
            ]},
            {"type": "section", "text": {"type": "mrkdwn", "text": format!("*Why it waits*\n{}", mrkdwn(&notice.reason))}},
            {"type": "section", "text": {"type": "mrkdwn", "text": format!("*Arguments*\n```{}```", mrkdwn(&shown_arguments(&notice.arguments)))}},
            {"type": "actions", "elements": [
                {"type": "button", "style": "primary", "action_id": "approve",
                 "text": {"type": "plain_text", "text": "Approve…"}, "url": notice.links.approve},
                {"type": "button", "style": "danger", "action_id": "deny",
                 "text": {"type": "plain_text", "text": "Deny…"}, "url": notice.links.deny},
                {"type": "button", "action_id": "dashboard",
                 "text": {"type": "plain_text", "text": "Dashboard"}, "url": notice.links.dashboard},
            ]},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": format!(
                "Approval `{}` · expires {} (then the call is denied) · each link asks you to sign in and confirm",
                notice.approval_id, when(notice.expires_at)
            )}]},
        ]
    })
}

/// An email's subject and plain-text body.
pub(crate) fn email(notice: &Notice) -> (String, String) {
    let body = format!(
        "A call is waiting for a person's decision.\n\n\
         Tool:         {tool}\n\
         Tier:         {tier}\n\
         Why it waits: {reason}\n\
         Org:          {org}\n\
         Session:      {session}\n\
         Requested by: {by}\n\
         Requested at: {at}\n\
         Expires at:   {expires} (then the call is denied)\n\n\
         Arguments:\n{arguments}\n\n\
         Approve: {approve}\n\
         Deny:    {deny}\n\n\
         Each link opens a page that asks you to sign in as an approver and confirm; opening it\n\
         decides nothing. Dashboard: {dashboard}\n\n\
         Approval {approval}\n",
        tool = notice.tool,
        tier = notice.tier.as_str(),
        reason = notice.reason,
        org = notice.org,
        session = notice.session,
        by = notice.requested_by.as_deref().unwrap_or("unknown"),
        at = when(notice.requested_at),
        expires = when(notice.expires_at),
        arguments = shown_arguments(&notice.arguments),
        approve = notice.links.approve,
        deny = notice.links.deny,
        dashboard = notice.links.dashboard,
        approval = notice.approval_id,
    );
    (title(notice), body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(arguments: Value) -> Notice {
        Notice {
            kind: "approval_required",
            org: OrgId::new("acme").unwrap(),
            session: SessionId::new("s-1").unwrap(),
            approval_id: "0190c1d2-0000-7000-8000-000000000001".parse().unwrap(),
            effect_id: "0190c1d2-0000-7000-8000-000000000002".parse().unwrap(),
            tool: "bank__transfer".into(),
            arguments,
            tier: Tier::Irreversible,
            reason: undolog_engine::hold_reason(Some(Tier::Irreversible)).into(),
            requested_by: Some("api-key:agent".into()),
            requested_at: Timestamp(1_700_000_000_000),
            expires_at: Timestamp(1_700_000_600_000),
            links: Links {
                approve: "https://gw/?link=A".into(),
                deny: "https://gw/?link=D".into(),
                dashboard: "https://gw/".into(),
            },
            escalation: 1,
        }
    }

    #[test]
    fn the_signature_is_stripes_scheme_over_the_timestamp_and_the_body() {
        let got = signature("secret", 1_700_000_000, br#"{"a":1}"#);
        let want = expected_hmac("secret", r#"1700000000.{"a":1}"#);
        assert_eq!(got, format!("t=1700000000,v1={want}"));
        assert_ne!(got, signature("secret", 1_700_000_001, br#"{"a":1}"#));
        assert_ne!(got, signature("other", 1_700_000_000, br#"{"a":1}"#));
    }

    /// HMAC-SHA256 by its definition (RFC 2104), not through the `hmac` crate.
    fn expected_hmac(key: &str, message: &str) -> String {
        use sha2::Digest;
        let mut block = [0u8; 64];
        block[..key.len()].copy_from_slice(key.as_bytes());
        let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
        let inner = sha2::Sha256::new()
            .chain_update(pad(0x36))
            .chain_update(message.as_bytes())
            .finalize();
        hex::encode(
            sha2::Sha256::new()
                .chain_update(pad(0x5c))
                .chain_update(inner)
                .finalize(),
        )
    }

    #[test]
    fn each_format_carries_the_tool_tier_reason_arguments_and_links() {
        let notice = notice(json!({"to": "mallory", "amount": 900}));
        let blocks = slack(&notice)["blocks"].as_array().unwrap().len();
        let slack = slack(&notice).to_string();
        let (subject, body) = email(&notice);
        for (what, text) in [("slack", slack.as_str()), ("email", body.as_str())] {
            for wanted in [
                "bank__transfer",
                "irreversible",
                "cannot be undone",
                "mallory",
                "https://gw/?link=A",
                "https://gw/?link=D",
            ] {
                assert!(text.contains(wanted), "{what} lacks {wanted}: {text}");
            }
        }
        assert_eq!(subject, "Approval needed: bank__transfer in org acme");
        assert_eq!(blocks, 6);
    }

    /// The injection as it was found: an argument that closed the arguments block and put an
    /// "Approve" link of the agent's in the message.
    #[test]
    fn what_the_agent_wrote_opens_no_link_and_closes_no_code_block_in_slack() {
        let link = "<https://evil.example/approve|Approve (recommended)>";
        let cases = [
            (
                "a fence and a link",
                json!({"memo": format!("```\n{link}\n```")}),
            ),
            ("a mention", json!({"memo": "<!channel> <@U123> &amp;"})),
            ("backticks alone", json!({"memo": "`a` ``b`` ````"})),
        ];
        for (what, arguments) in cases {
            let mut notice = notice(arguments);
            notice.session = SessionId::new("s`<x|y>").unwrap_or(notice.session);
            let message = slack(&notice);
            let texts = mrkdwn_texts(&message);
            let all = texts.join("\n");
            assert_eq!(
                all.matches("```").count(),
                2,
                "{what}: one block, opened and closed: {all}"
            );
            assert!(
                !all.contains("<https://evil"),
                "{what}: a link of the agent's: {all}"
            );
            assert!(
                !all.contains("<!channel>") && !all.contains("<@U"),
                "{what}: {all}"
            );
            // Every `<` left is one the gateway wrote: none.
            assert!(!all.contains('<'), "{what}: {all}");
        }
        let found = slack(&notice(json!({"memo": link}))).to_string();
        assert!(
            found.contains("&lt;https://evil.example/approve|Approve (recommended)&gt;"),
            "{found}"
        );
    }

    /// Every text of a Slack message that Slack reads as mrkdwn (the fallback `text` too).
    fn mrkdwn_texts(message: &Value) -> Vec<String> {
        let mut texts = vec![message["text"].as_str().unwrap().to_owned()];
        for block in message["blocks"].as_array().unwrap() {
            let parts = (block.get("fields").and_then(Value::as_array).cloned())
                .or_else(|| block.get("elements").and_then(Value::as_array).cloned())
                .unwrap_or_else(|| vec![block["text"].clone()]);
            for part in parts {
                if part["type"] == "mrkdwn" {
                    texts.push(part["text"].as_str().unwrap().to_owned());
                }
            }
        }
        texts
    }

    #[test]
    fn long_arguments_are_cut_in_messages_on_a_character_boundary() {
        let long = notice(json!({"note": "é".repeat(5_000)}));
        let (_, body) = email(&long);
        assert!(body.contains("bytes in all)"), "{body}");
        assert!(body.len() < 4_000);
        let short = notice(json!({"a": 1}));
        assert!(!email(&short).1.contains("bytes in all"));
    }

    #[test]
    fn an_escalation_says_so_in_its_title() {
        let mut later = notice(json!({}));
        later.escalation = 2;
        assert!(
            email(&later)
                .0
                .contains("escalation 2: nobody has decided yet")
        );
    }
}
