//! Telling people of held calls where they are: a signed webhook, a Slack incoming webhook, or
//! email, each with approve and deny links ([`links`]).
//!
//! The process that records an approval announces it, once: a gateway with its own engine (in a
//! fleet on one store, the one that held the call), or `undolog engine` for the gateways in front
//! of it. Every `[[notify]]` target is
//! told at once; with `[approvals] escalate_after_secs`, the first target is, and each next one
//! after that long if nobody has decided. Each delivery is retried with backoff and recorded
//! (`GET /v1/notifications`, the `notifications_total` series, a log line when it fails).
//! Deliveries are kept in this process: the last [`KEPT`] of them.
//!
//! It holds the notices, their delivery and the signed links; it reads the engine's events and
//! its configuration, and knows nothing of HTTP serving or of MCP: whoever serves the links
//! maps [`links::LinkError`] to an answer, and counts deliveries through [`Tally`].

pub mod links;
mod message;
mod send;

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use serde::Serialize;
use tokio::sync::broadcast::error::RecvError;
use undolog_engine::{Engine, Event};
use undolog_types::{ApprovalId, ApprovalState, EffectId, OrgId, Timestamp};

use self::{
    links::{Link, LinkDecision, LinkKey},
    message::{Links, Notice},
};
use undolog_config::{GatewayConfig, NotifyTarget};

/// Counts each delivery by its target, delivered or not (the gateway's `notifications_total`).
pub trait Tally: Send + Sync + std::fmt::Debug {
    fn notified(&self, target: &str, delivered: bool);
}

/// How many delivery records are kept.
pub const KEPT: usize = 1_000;

/// One target told of one held call.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    #[serde(skip)]
    org: OrgId,
    pub approval_id: ApprovalId,
    pub target: String,
    pub kind: &'static str,
    pub escalation: u32,
    pub attempts: u32,
    pub delivered: bool,
    pub error: Option<String>,
    pub at: Timestamp,
}

#[derive(Debug)]
pub struct Notifier {
    targets: Vec<NotifyTarget>,
    public_url: String,
    escalate_after: Option<Duration>,
    pub links: LinkKey,
    http: reqwest::Client,
    deliveries: Mutex<VecDeque<Delivery>>,
    tally: Arc<dyn Tally>,
}

impl Notifier {
    pub fn new(config: &GatewayConfig, tally: Arc<dyn Tally>) -> Notifier {
        let approvals = &config.approvals;
        if approvals.link_secret.is_none() && !config.notify.is_empty() {
            tracing::warn!(
                "[approvals] link_secret is not set: approval links work only until this process \
                 stops, and only here; set one (32 characters or more) shared by every gateway"
            );
        }
        Notifier {
            targets: config.notify.clone(),
            public_url: approvals.public_url.clone(),
            escalate_after: approvals.escalate_after,
            links: LinkKey::new(approvals.link_secret.as_ref()),
            // A receiver that redirects does not get the signed notice sent on elsewhere.
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .tcp_nodelay(true)
                .build()
                .expect("a TLS-less HTTP client builds"),
            deliveries: Mutex::new(VecDeque::new()),
            tally,
        }
    }

    /// Announces every approval `engine` records from now on.
    pub fn follow(self: &Arc<Self>, engine: &Engine) {
        if self.targets.is_empty() {
            return;
        }
        let notifier = Arc::downgrade(self);
        // Its own commits only: in a fleet on one store, the gateway that held the call tells.
        let mut events = engine.subscribe_own();
        let engine = engine.clone();
        tokio::spawn(async move {
            loop {
                let (org, approval, effect) = match events.recv().await {
                    Ok(Event::ApprovalRequired {
                        org,
                        approval_id,
                        effect_id,
                        ..
                    }) => (org, approval_id, effect_id),
                    Ok(_) => continue,
                    Err(RecvError::Lagged(missed)) => {
                        tracing::error!(
                            missed,
                            "events came faster than notifications were started; some held calls \
                             may not have been announced (they still wait in the dashboard)"
                        );
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                };
                let Some(notifier) = notifier.upgrade() else {
                    return;
                };
                tokio::spawn(notifier.announce(engine.clone(), org, approval, effect));
            }
        });
    }

    /// The deliveries of `org`'s held calls, newest first.
    pub fn deliveries(&self, org: &OrgId) -> Vec<Delivery> {
        let kept = self
            .deliveries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        kept.iter()
            .rev()
            .filter(|d| &d.org == org)
            .cloned()
            .collect()
    }

    /// The approve and deny links of `approval` for `target`.
    fn links(
        &self,
        org: &OrgId,
        approval: ApprovalId,
        expires_at: Timestamp,
        target: &str,
    ) -> Links {
        let link = |decision| {
            let token = self.links.sign(&Link {
                approval,
                org: org.clone(),
                decision,
                target: target.to_owned(),
                expires_at: expires_at.as_millis(),
            });
            format!("{}/?link={token}", self.public_url)
        };
        Links {
            approve: link(LinkDecision::Approve),
            deny: link(LinkDecision::Deny),
            dashboard: format!("{}/", self.public_url),
        }
    }

    async fn announce(
        self: Arc<Self>,
        engine: Engine,
        org: OrgId,
        id: ApprovalId,
        effect: EffectId,
    ) {
        let (approval, effect) = match (
            engine.approval(&org, id).await,
            engine.effect(&org, effect).await,
        ) {
            (Ok(approval), Ok(effect)) => (approval, effect),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!(approval = %id, error = %e, "cannot read a held call to announce it");
                return;
            }
        };
        let notice = Notice {
            kind: "approval_required",
            org: org.clone(),
            session: approval.session.clone(),
            approval_id: id,
            effect_id: effect.id,
            tool: effect.tool.clone(),
            arguments: effect.args.clone().into(),
            tier: effect.tier,
            reason: undolog_engine::hold_reason(Some(effect.tier)).to_owned(),
            requested_by: approval.requested_by.clone(),
            requested_at: approval.requested_at,
            expires_at: approval.expires_at,
            links: Links::default(),
            escalation: 1,
        };
        let Some(every) = self.escalate_after else {
            let all = self.targets.iter().map(|target| self.tell(target, &notice));
            futures::future::join_all(all).await;
            return;
        };
        for (i, target) in self.targets.iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(every).await;
                match engine.approval(&org, id).await {
                    Ok(now) if now.state == ApprovalState::Pending => {}
                    _ => return,
                }
            }
            let escalated = Notice {
                escalation: i as u32 + 1,
                ..notice.clone()
            };
            self.tell(target, &escalated).await;
        }
    }

    async fn tell(&self, target: &NotifyTarget, notice: &Notice) {
        let notice = Notice {
            links: self.links(
                &notice.org,
                notice.approval_id,
                notice.expires_at,
                &target.name,
            ),
            ..notice.clone()
        };
        let sent = send::deliver(&self.http, target, &notice).await;
        self.tally.notified(&target.name, sent.failure.is_none());
        let mut kept = self
            .deliveries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(Delivery {
            org: notice.org.clone(),
            approval_id: notice.approval_id,
            target: target.name.clone(),
            kind: target.channel.kind(),
            escalation: notice.escalation,
            attempts: sent.attempts,
            delivered: sent.failure.is_none(),
            error: sent.failure,
            at: Timestamp::now(),
        });
    }
}
