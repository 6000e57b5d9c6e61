//! A held call reaches people where they are: a signed webhook, a Slack incoming webhook and a
//! real SMTP server (aiosmtpd). The links they carry decide only after an approver signs in and
//! confirms, once; an expired, replayed or altered link is refused.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::post,
};
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader, Lines},
    process::{Child, ChildStdout, Command},
};
use undolog_types::Role;

use crate::harness::{Credential, TestGateway, first_line, fixture, python, spawn};

const WEBHOOK_SECRET: &str = "whsec_a-test-secret-of-some-length";

/// What the receiver heard: the path, the headers and the body of each POST.
type Heard = Arc<Mutex<Vec<(String, HeaderMap, Vec<u8>)>>>;

/// An HTTP receiver of webhooks, as the real ones: it answers 503 to the first `refuse` POSTs of
/// `/hook` (so the gateway must retry), 200 to everything else.
struct Receiver {
    url: String,
    heard: Heard,
}

impl Receiver {
    async fn start(refuse: usize) -> Receiver {
        let heard: Heard = Arc::default();
        let state = (heard.clone(), Arc::new(Mutex::new(refuse)));
        let app = Router::new()
            .route("/{path}", post(Receiver::hear))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { url, heard }
    }

    async fn hear(
        State((heard, refuse)): State<(Heard, Arc<Mutex<usize>>)>,
        axum::extract::Path(path): axum::extract::Path<String>,
        headers: HeaderMap,
        body: axum::body::Bytes,
    ) -> StatusCode {
        heard
            .lock()
            .unwrap()
            .push((path.clone(), headers, body.to_vec()));
        if path == "moved" {
            return StatusCode::TEMPORARY_REDIRECT; // (no Location needed: it is never followed)
        }
        let mut refuse = refuse.lock().unwrap();
        if path == "hook" && *refuse > 0 {
            *refuse -= 1;
            return StatusCode::SERVICE_UNAVAILABLE;
        }
        StatusCode::OK
    }

    /// The POSTs to `/path` so far, waiting up to 20 s for `count` of them.
    async fn posts(&self, path: &str, count: usize) -> Vec<(HeaderMap, Value)> {
        for _ in 0..200 {
            let got: Vec<_> = (self.heard.lock().unwrap().iter())
                .filter(|(p, _, _)| p == path)
                .map(|(_, h, b)| (h.clone(), serde_json::from_slice(b).unwrap()))
                .collect();
            if got.len() >= count {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("fewer than {count} POSTs reached /{path}");
    }
}

/// The real SMTP server the gateway mails.
struct Smtp {
    port: u16,
    out: Lines<BufReader<ChildStdout>>,
    _child: Child,
}

impl Smtp {
    async fn start() -> Smtp {
        let mut child = spawn(Command::new(python("mcp2")).arg(fixture("smtp_sink.py")));
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = first_line(&mut out).await["port"].as_u64().unwrap() as u16;
        Smtp {
            port,
            out,
            _child: child,
        }
    }

    async fn next_email(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.out.next_line()).await;
        let line = line.expect("an email within 20 s").unwrap().unwrap();
        serde_json::from_str(&line).unwrap()
    }
}

/// Checks a delivery's `UndoLog-Signature` as a receiver would: `t=UNIX,v1=HEX` where HEX is
/// HMAC-SHA256 of `"{t}.{body}"` under the shared secret, and `t` recent.
fn signature_holds(headers: &HeaderMap, body: &[u8], secret: &str) -> bool {
    let header = headers["undolog-signature"].to_str().unwrap();
    let (t, v1) = header.split_once(",v1=").unwrap();
    let t: i64 = t.strip_prefix("t=").unwrap().parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    (now - t).abs() < 300 && mac.verify_slice(&hex::decode(v1).unwrap()).is_ok()
}

/// The token of a `…/?link=TOKEN` link.
fn token_of(link: &str) -> String {
    link.split_once("?link=")
        .unwrap_or_else(|| panic!("not a link: {link}"))
        .1
        .to_owned()
}

fn toml(receiver: &Receiver, smtp_port: u16, approvals: &str) -> String {
    format!(
        r#"
[approvals]
public_url = "@GATEWAY@"
link_secret = "a-link-secret-of-at-least-thirty-two-characters"
{approvals}

[[notify]]
name = "ops-hook"
kind = "webhook"
url = "{url}/hook"
secret = "{WEBHOOK_SECRET}"

[[notify]]
name = "ops-slack"
kind = "slack"
url = "{url}/slack"

[[notify]]
name = "ops-mail"
kind = "email"
smtp = "smtp://127.0.0.1:{smtp_port}"
from = "UndoLog <undolog@example.com>"
to = ["approver@example.com"]
"#,
        url = receiver.url
    )
}

async fn held_email(gw: &TestGateway, agent: &Credential) -> Value {
    let email = json!({"to": "bob@example.com", "subject": "hi"});
    let (status, held) = gw.rest_call(Some(agent), "s-1", "send_email", email).await;
    assert_eq!(status, 202, "{held}");
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_reaches_a_webhook_slack_and_email_and_is_approved_through_its_signed_link() {
    let receiver = Receiver::start(1).await;
    let mut smtp = Smtp::start().await;
    let gw = TestGateway::start(&toml(&receiver, smtp.port, "")).await;
    let agent = gw.key("acme", Role::Agent).await;
    let approver = gw.key("acme", Role::Approver).await;
    let stranger = gw.key("globex", Role::Approver).await;
    let held = held_email(&gw, &agent).await;
    let approval = held["approval_id"].as_str().unwrap().to_owned();

    // The webhook: refused once, delivered on the retry, signed, with what a person needs.
    let hooks = receiver.posts("hook", 2).await;
    let raw_body = {
        let heard = receiver.heard.lock().unwrap();
        heard
            .iter()
            .rfind(|(p, _, _)| p == "hook")
            .unwrap()
            .2
            .clone()
    };
    let (headers, hook) = &hooks[1];
    assert!(
        signature_holds(headers, &raw_body, WEBHOOK_SECRET),
        "{headers:?}"
    );
    assert!(!signature_holds(
        headers,
        &raw_body,
        "another-secret-entirely"
    ));
    assert_eq!(hook["type"], "approval_required");
    assert_eq!(hook["approval_id"], approval.as_str());
    assert_eq!(hook["tool"], "send_email");
    assert_eq!(hook["tier"], "irreversible");
    assert_eq!(hook["arguments"]["to"], "bob@example.com");
    assert_eq!(hook["requested_by"], agent.actor.as_str());
    assert!(
        hook["reason"].as_str().unwrap().contains("irreversible"),
        "{hook}"
    );

    // Slack: Block Kit, with the links as buttons.
    let slack = &receiver.posts("slack", 1).await[0].1;
    let buttons = &slack["blocks"][4]["elements"];
    assert_eq!(buttons[0]["action_id"], "approve", "{slack}");
    let slack_deny = buttons[1]["url"].as_str().unwrap().to_owned();
    assert!(slack["text"].as_str().unwrap().contains("send_email"));

    // Email, through a real SMTP server.
    let mail = smtp.next_email().await;
    assert_eq!(mail["to"], json!(["approver@example.com"]));
    assert!(mail["subject"].as_str().unwrap().contains("send_email"));
    let text = mail["text"].as_str().unwrap();
    let approve_link = text
        .lines()
        .find_map(|l| l.strip_prefix("Approve: "))
        .unwrap_or_else(|| panic!("no approve link in {text}"));
    assert!(approve_link.starts_with(&gw.base), "{approve_link}");
    let token = token_of(approve_link);

    // Opening the link shows the dashboard's confirmation page; it decides nothing.
    let page = gw.http.get(approve_link).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("<html"));
    let (_, still) = gw
        .get_as(Some(&approver), &format!("/v1/approvals/{approval}"))
        .await;
    assert_eq!(still["state"], "pending", "{still}");

    let path = format!("/v1/links/{token}");
    let (status, view) = gw.get_as(Some(&approver), &path).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (&view["decision"], &view["tool"], &view["via"]),
        (
            &json!("approve"),
            &json!("send_email"),
            &json!("link:ops-mail")
        )
    );
    let mut altered = token.clone();
    altered.insert(4, 'x');
    let refusals = [
        ("nobody signed in", None, path.clone(), 401, "unauthorized"),
        (
            "the agent whose call it is",
            Some(&agent),
            path.clone(),
            403,
            "forbidden",
        ),
        (
            "an approver of another org",
            Some(&stranger),
            path.clone(),
            404,
            "unknown_approval",
        ),
        (
            "an altered link",
            Some(&approver),
            format!("/v1/links/{altered}"),
            403,
            "link_tampered",
        ),
        (
            "not a link",
            Some(&approver),
            "/v1/links/nonsense".into(),
            400,
            "link_malformed",
        ),
    ];
    for (who, key, path, status, code) in refusals {
        let (got, body) = gw.post_as(key, &path, json!({})).await;
        assert_eq!(
            (got, body["code"].as_str()),
            (status, Some(code)),
            "{who}: {body}"
        );
    }

    // The approver confirms: the decision records who and through which channel.
    let (status, decided) = gw.post_as(Some(&approver), &path, json!({})).await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["state"], "approved");
    assert_eq!(decided["decided_by"], approver.actor.as_str());
    assert_eq!(decided["decided_via"], "link:ops-mail");

    // Single use: the same link again, or the other link of the pair, is refused.
    for (what, token) in [
        ("replayed", token.clone()),
        ("its pair", token_of(&slack_deny)),
    ] {
        let path = format!("/v1/links/{token}");
        let (status, body) = gw
            .post_as(Some(&approver), &path, json!({"reason": "no"}))
            .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (409, Some("already_decided")),
            "{what}: {body}"
        );
    }

    // The held call, retried, now runs.
    let email = json!({"to": "bob@example.com", "subject": "hi"});
    let (status, ran) = gw.rest_call(Some(&agent), "s-1", "send_email", email).await;
    assert_eq!(status, 200, "{ran}");

    // Every delivery is on record, the webhook's with its two attempts.
    let (status, deliveries) = gw.get_as(Some(&approver), "/v1/notifications").await;
    assert_eq!(status, 200, "{deliveries}");
    let by_target = |name: &str| {
        deliveries
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["target"] == name)
            .unwrap_or_else(|| panic!("no delivery to {name}: {deliveries}"))
            .clone()
    };
    let hook = by_target("ops-hook");
    assert_eq!(
        (&hook["delivered"], &hook["attempts"]),
        (&json!(true), &json!(2)),
        "{hook}"
    );
    for (name, kind) in [("ops-slack", "slack"), ("ops-mail", "email")] {
        let delivery = by_target(name);
        assert_eq!(
            (
                &delivery["delivered"],
                &delivery["attempts"],
                &delivery["kind"]
            ),
            (&json!(true), &json!(1), &json!(kind)),
            "{delivery}"
        );
    }
    let (_, theirs) = gw.get_as(Some(&stranger), "/v1/notifications").await;
    assert_eq!(theirs, json!([]), "another org's deliveries stay its own");
    let (status, _) = gw.get_as(Some(&agent), "/v1/notifications").await;
    assert_eq!(status, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_deciding_escalates_to_the_next_target_and_an_expired_link_is_refused() {
    let receiver = Receiver::start(0).await;
    let mut smtp = Smtp::start().await;
    let approvals = "timeout_secs = 4\nescalate_after_secs = 1";
    let gw = TestGateway::start(&toml(&receiver, smtp.port, approvals)).await;
    let agent = gw.key("acme", Role::Agent).await;
    let approver = gw.key("acme", Role::Approver).await;
    held_email(&gw, &agent).await;

    // The webhook first, then Slack a second later, then email: nobody decided.
    let hook = receiver.posts("hook", 1).await[0].1.clone();
    assert_eq!(hook["escalation"], 1);
    let slack = receiver.posts("slack", 1).await[0].1.clone();
    assert!(
        slack["text"].as_str().unwrap().contains("escalation 2"),
        "{slack}"
    );
    let mail = smtp.next_email().await;
    assert!(
        mail["subject"].as_str().unwrap().contains("escalation 3"),
        "{mail}"
    );

    // After the approval's time, its links are refused, and the call was denied.
    tokio::time::sleep(Duration::from_millis(4_200)).await;
    let token = token_of(hook["links"]["approve"].as_str().unwrap());
    let (status, body) = gw
        .post_as(Some(&approver), &format!("/v1/links/{token}"), json!({}))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (410, Some("link_expired")),
        "{body}"
    );
    let email = json!({"to": "bob@example.com", "subject": "hi"});
    let (status, refused) = gw.rest_call(Some(&agent), "s-1", "send_email", email).await;
    assert_ne!(
        status, 200,
        "an expired approval never lets the call run: {refused}"
    );
}

/// On expiry the held call is denied, fail-closed, and the agent waiting on it is told why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_nobody_decides_in_time_is_refused_and_the_agent_told_why() {
    let gw = TestGateway::start("[approvals]\ntimeout_secs = 1\nhold_secs = 30\n").await;
    let agent = gw.key("acme", Role::Agent).await;
    let params =
        json!({"name": "send_email", "arguments": {"to": "bob@example.com", "subject": "hi"}});
    let started = std::time::Instant::now();
    let (status, answer) = gw
        .rpc(
            Some(&agent),
            "tools/call",
            params,
            json!({}),
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "answered at expiry, not at hold's end"
    );
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    let said = result["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("expired") && said.contains("did not run"),
        "the agent is told why: {said}"
    );
    // Denied for good: no new request was opened behind the agent's back.
    let approver = gw.key("acme", Role::Approver).await;
    let (_, pending) = gw
        .get_as(Some(&approver), "/v1/approvals?status=pending")
        .await;
    assert_eq!(pending, json!([]), "{pending}");
    let (_, expired) = gw
        .get_as(Some(&approver), "/v1/approvals?status=expired")
        .await;
    assert_eq!(expired.as_array().map(Vec::len), Some(1), "{expired}");
}

/// Two gateways on one PostgreSQL store hear each other's events (for their dashboards), but a
/// held call is announced once: by the gateway that held it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_fleet_on_one_store_a_held_call_is_announced_once() {
    let receiver = Receiver::start(0).await;
    let db = crate::postgres::fresh_database();
    let toml = format!(
        "[[notify]]\nkind = \"webhook\"\nurl = \"{}/hook\"\nsecret = \"{WEBHOOK_SECRET}\"\n",
        receiver.url
    );
    let first = TestGateway::start_on(&toml, Some(db.url())).await;
    let second = TestGateway::start_on(&toml, Some(db.url())).await;
    let agent = first.key("acme", Role::Agent).await;
    held_email(&first, &agent).await;
    receiver.posts("hook", 1).await;
    // Long enough for the second gateway to have heard the event and, wrongly, told too.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let told = receiver.heard.lock().unwrap().len();
    assert_eq!(told, 1, "one announcement in all");
    let approver = second.key("acme", Role::Approver).await;
    let (status, heard) = second.get_as(Some(&approver), "/v1/notifications").await;
    assert_eq!(
        (status, heard),
        (200, json!([])),
        "the second gateway told nobody"
    );
}

/// A receiver that redirects is not followed (the signed notice goes nowhere else), and the
/// delivery fails at once, saying what to fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirecting_receiver_is_not_followed_and_the_delivery_says_so() {
    let receiver = Receiver::start(0).await;
    let toml = format!(
        "[[notify]]\nname = \"moved\"\nkind = \"webhook\"\nurl = \"{}/moved\"\nsecret = \"{WEBHOOK_SECRET}\"\n",
        receiver.url
    );
    let gw = TestGateway::start(&toml).await;
    let agent = gw.key("acme", Role::Agent).await;
    let approver = gw.key("acme", Role::Approver).await;
    held_email(&gw, &agent).await;
    receiver.posts("moved", 1).await;
    let mut deliveries = json!([]);
    for _ in 0..100 {
        deliveries = gw.get_as(Some(&approver), "/v1/notifications").await.1;
        if deliveries.as_array().is_some_and(|d| !d.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let delivery = &deliveries[0];
    assert_eq!(
        (&delivery["delivered"], &delivery["attempts"]),
        (&json!(false), &json!(1)),
        "{delivery}"
    );
    assert!(
        delivery["error"]
            .as_str()
            .unwrap()
            .contains("configure the URL it redirects to"),
        "{delivery}"
    );
    assert_eq!(
        receiver.heard.lock().unwrap().len(),
        1,
        "tried once, followed nowhere"
    );
}
