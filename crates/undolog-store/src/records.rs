//! The rows of the log, as the engine sees them.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use undolog_types::{
    ApprovalId, ApprovalState, Args, EffectId, EffectState, OrgId, Role, SessionId, SessionState,
    Signature, Tier, Timestamp, TokenDigest,
};

/// One agent session: the unit of replay and of undo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub org: OrgId,
    pub id: SessionId,
    pub state: SessionState,
    /// The sequence number the next effect of this session gets.
    pub next_seq: i64,
    /// The effect whose compensation failed, kept for a person to resolve.
    pub failed_effect: Option<EffectId>,
    /// The undo that owns the session while it is compensating: only its holder runs steps,
    /// and another undo is refused until the claim is released or runs out.
    pub undo_claim: Option<Lease>,
    /// The principal whose implicit run this is, when the gateway started it for a client that
    /// named no session; `None` for a session a client named.
    pub run_of: Option<String>,
    /// The credential that opened it (the caller of its first call), whose alone it is: no
    /// other caller joins it, and only it, approvers and admins read it. `None` for a session
    /// recorded before sessions had openers, or opened by a call that named no caller: open to
    /// every caller of its org, as sessions were.
    pub opened_by: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Session {
    /// Who it belongs to: its opener, or the principal whose run it is.
    pub fn opener(&self) -> Option<&str> {
        self.opened_by.as_deref().or(self.run_of.as_deref())
    }

    /// Whether `caller` may call in it and read it as an agent: its opener, or anyone when it
    /// has none.
    pub fn belongs_to(&self, caller: Option<&str>) -> bool {
        self.opener().is_none_or(|opener| caller == Some(opener))
    }
}

/// How to undo an effect. Recorded with the effect before the tool runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Compensation {
    /// A tool of an upstream, called through the gateway with an argument template that may read
    /// the original `args` and `result`. Only a tool the configuration declares as a
    /// compensation may be named.
    Upstream { tool: String, args: Value },
    /// A function in the process of the SDK caller that recorded the effect; only that caller
    /// can run it (its undo, step by step).
    Local { function: String },
}

impl Compensation {
    /// How an SDK marked a local function before compensations were typed.
    const LEGACY_LOCAL_PREFIX: &'static str = "sdk:";
}

/// Reads both the typed form (`{"kind": "upstream" | "local", …}`) and the form written before
/// it (`{"tool", "args"}`, with `sdk:` marking a local function), so older logs still undo.
impl<'de> Deserialize<'de> for Compensation {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        enum Typed {
            Upstream {
                tool: String,
                #[serde(default = "empty_object")]
                args: Value,
            },
            Local {
                function: String,
            },
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Legacy {
            tool: String,
            #[serde(default = "empty_object")]
            args: Value,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Typed(Typed),
            Legacy(Legacy),
        }
        let either = Either::deserialize(deserializer).map_err(|_| {
            serde::de::Error::custom(
                "a compensation is {\"kind\": \"upstream\", \"tool\", \"args\"} or \
                 {\"kind\": \"local\", \"function\"}",
            )
        })?;
        Ok(match either {
            Either::Typed(Typed::Upstream { tool, args }) => Compensation::Upstream { tool, args },
            Either::Typed(Typed::Local { function }) => Compensation::Local { function },
            Either::Legacy(Legacy { tool, args }) => {
                match tool.strip_prefix(Compensation::LEGACY_LOCAL_PREFIX) {
                    Some(function) => Compensation::Local {
                        function: function.to_owned(),
                    },
                    None => Compensation::Upstream { tool, args },
                }
            }
        })
    }
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Who is executing a pending effect, and until when that claim holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub holder: String,
    pub expires_at: Timestamp,
}

/// One recorded tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    pub id: EffectId,
    pub org: OrgId,
    pub session: SessionId,
    /// Order of interception within the session.
    pub seq: i64,
    pub tool: String,
    pub args: Args,
    pub step: Option<u64>,
    pub signature: Signature,
    pub idempotency_key: Option<String>,
    pub tier: Tier,
    pub compensation: Option<Compensation>,
    pub state: EffectState,
    pub result: Option<Value>,
    pub error: Option<String>,
    /// What the interceptor chains decided about the call (`{request?, response?}`, each a
    /// SEP-2624 `ChainExecutionResult`), kept apart from what the tool answered.
    pub verdicts: Option<Value>,
    pub approval: Option<ApprovalId>,
    pub lease: Option<Lease>,
    /// The digest of the lease token its executor was given (`Intercept::Execute`): whoever
    /// settles the call must present that token. Kept after the call ends; replaced when another
    /// executor takes the call over. Never shown: no API answers it.
    #[serde(default, skip_serializing)]
    pub lease_token: Option<TokenDigest>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub completed_at: Option<Timestamp>,
    /// Who recorded the outcome by hand, for an effect that was in doubt.
    pub resolved_by: Option<String>,
}

/// A request for a person's decision, bound to one call's signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    pub id: ApprovalId,
    pub org: OrgId,
    pub session: SessionId,
    pub effect: EffectId,
    pub signature: Signature,
    pub state: ApprovalState,
    pub requested_at: Timestamp,
    pub expires_at: Timestamp,
    /// Who made the call: that principal may not decide it (four eyes).
    pub requested_by: Option<String>,
    pub decided_by: Option<String>,
    /// Where the decision was made: `api` (a direct request, the dashboard and CLI included) or
    /// `link:CHANNEL` (a signed link a notification carried: `link:email`, `link:slack`, …).
    #[serde(default)]
    pub decided_via: Option<String>,
    pub decided_at: Option<Timestamp>,
    pub reason: Option<String>,
}

/// A session's whole history, exported as JSON at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub org: OrgId,
    pub session: SessionId,
    pub taken_at: Timestamp,
    pub body: Value,
}

/// A credential that names an org. Only the hash of the secret is stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    /// A short public id, safe to print and to list.
    pub id: String,
    pub org: OrgId,
    /// Lowercase hex BLAKE3 of the secret.
    pub hash: String,
    pub role: Role,
    pub label: Option<String>,
    pub created_at: Timestamp,
    /// Once set, the key no longer authenticates anything.
    pub revoked_at: Option<Timestamp>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Compensation;

    #[test]
    fn compensations_read_both_the_typed_and_the_older_form() {
        let upstream = |tool: &str, args| Compensation::Upstream {
            tool: tool.into(),
            args,
        };
        let cases = [
            (
                json!({"kind": "upstream", "tool": "refund", "args": {"id": 1}}),
                Some(upstream("refund", json!({"id": 1}))),
            ),
            (
                json!({"kind": "upstream", "tool": "refund"}),
                Some(upstream("refund", json!({}))),
            ),
            (
                json!({"kind": "local", "function": "cancel"}),
                Some(Compensation::Local {
                    function: "cancel".into(),
                }),
            ),
            // Written before compensations were typed.
            (
                json!({"tool": "refund", "args": {"id": 1}}),
                Some(upstream("refund", json!({"id": 1}))),
            ),
            (
                json!({"tool": "sdk:cancel", "args": {}}),
                Some(Compensation::Local {
                    function: "cancel".into(),
                }),
            ),
            (json!({"kind": "shell", "command": "rm"}), None),
            (json!({"kind": "local", "function": "f", "tool": "x"}), None),
            (json!({"args": {}}), None),
            (json!("refund"), None),
        ];
        for (wire, expected) in cases {
            let read = serde_json::from_value::<Compensation>(wire.clone()).ok();
            assert_eq!(read, expected, "{wire}");
            if let Some(read) = read {
                let again = serde_json::to_value(&read).unwrap();
                assert_eq!(serde_json::from_value::<Compensation>(again).unwrap(), read);
            }
        }
    }
}
