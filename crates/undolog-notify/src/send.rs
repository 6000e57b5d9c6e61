//! Sending one notice to one target, with retries: an HTTP POST (webhook, Slack) or an email.

use std::time::Duration;

use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use undolog_types::Timestamp;

use super::message::{self, Notice, SIGNATURE_HEADER};
use undolog_config::{Channel, NotifyTarget};

/// Tries per delivery, and the wait before the second (doubled each time after).
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// How long one try may take.
const TRY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why one try failed, and whether another could succeed.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) error: String,
    pub(super) permanent: bool,
}

/// What became of a delivery: how many tries it took, and the last failure if none succeeded.
#[derive(Debug)]
pub(super) struct Sent {
    pub(super) attempts: u32,
    pub(super) failure: Option<String>,
}

/// Delivers `notice` to `target`, retrying failures that may pass (a refused connection, a 5xx,
/// 408 or 429, a transient SMTP reply) with backoff.
pub(super) async fn deliver(
    http: &reqwest::Client,
    target: &NotifyTarget,
    notice: &Notice,
) -> Sent {
    let mut backoff = FIRST_BACKOFF;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let tried = tokio::time::timeout(TRY_TIMEOUT, once(http, target, notice)).await;
        let failure = match tried {
            Ok(Ok(())) => {
                return Sent {
                    attempts,
                    failure: None,
                };
            }
            Ok(Err(failure)) => failure,
            Err(_) => Failure {
                error: format!("no answer within {TRY_TIMEOUT:?}"),
                permanent: false,
            },
        };
        tracing::warn!(
            target_name = %target.name, attempts, error = %failure.error,
            "a notification of a held call was not delivered"
        );
        if failure.permanent || attempts == ATTEMPTS {
            return Sent {
                attempts,
                failure: Some(failure.error),
            };
        }
        tokio::time::sleep(backoff).await;
        backoff *= 2;
    }
}

async fn once(
    http: &reqwest::Client,
    target: &NotifyTarget,
    notice: &Notice,
) -> Result<(), Failure> {
    match &target.channel {
        Channel::Webhook { url, secret } => {
            let body = serde_json::to_vec(notice).expect("a notice serializes");
            let now = Timestamp::now().as_millis() / 1000;
            let signature = message::signature(&secret.0, now, &body);
            let request = http
                .post(url)
                .header("content-type", "application/json")
                .header(SIGNATURE_HEADER, signature)
                .header("undolog-event", notice.kind)
                .body(body);
            posted(request).await
        }
        Channel::Slack { url } => posted(http.post(url).json(&message::slack(notice))).await,
        Channel::Email { smtp, from, to } => mailed(&smtp.0, from, to, notice).await,
    }
}

async fn posted(request: reqwest::RequestBuilder) -> Result<(), Failure> {
    let response = request.send().await.map_err(|e| Failure {
        error: format!("cannot reach the receiver: {e}"),
        permanent: false,
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    // Redirects are not followed: the signed notice goes only where it was configured to.
    if status.is_redirection() {
        return Err(Failure {
            error: format!("the receiver answered {status}: configure the URL it redirects to"),
            permanent: true,
        });
    }
    let said: String = response
        .text()
        .await
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect();
    Err(Failure {
        error: format!("the receiver answered {status}: {said}"),
        permanent: status.is_client_error() && status != 408 && status != 429,
    })
}

async fn mailed(smtp: &str, from: &str, to: &[String], notice: &Notice) -> Result<(), Failure> {
    // Both were checked when the configuration loaded.
    let broken = |e: String| Failure {
        error: e,
        permanent: true,
    };
    let (subject, body) = message::email(notice);
    let mut builder = Message::builder()
        .from(from.parse().map_err(|e| broken(format!("from: {e}")))?)
        .subject(subject);
    for address in to {
        builder = builder.to(address.parse().map_err(|e| broken(format!("to: {e}")))?);
    }
    let email = builder
        .body(body)
        .map_err(|e| broken(format!("cannot build the email: {e}")))?;
    let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(smtp)
        .map_err(|e| broken(format!("smtp: {e}")))?
        .timeout(Some(TRY_TIMEOUT))
        .build();
    transport
        .send(email)
        .await
        .map(|_| ())
        .map_err(|e| Failure {
            permanent: e.is_permanent(),
            error: format!("the SMTP server refused the email: {e}"),
        })
}
