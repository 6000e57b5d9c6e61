//! `undolog keys create|list|revoke`: API keys in the store the configuration names. These are
//! the operator's commands (whoever holds the store), so they work before any key exists.

use undolog_store::ApiKey;
use undolog_types::{OrgId, Role, Timestamp};

use super::serve::Source;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum KeysCommand {
    /// Make a key for an org. The key is printed once; keep it safe.
    Create {
        #[arg(long)]
        org: String,
        /// What the key may do: `agent` calls tools (the default, least privilege),
        /// `approver` also decides approvals, `admin` also undoes and resolves in-doubt effects.
        #[arg(long, default_value = "agent")]
        role: String,
        /// A note to tell keys apart.
        #[arg(long)]
        label: Option<String>,
        /// Print `{"id", "org", "role", "key"}` as JSON instead.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        source: Source,
    },
    /// List the keys (ids, orgs, roles; never the secrets), of one org or all.
    List {
        #[arg(long)]
        org: Option<String>,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        source: Source,
    },
    /// Revoke a key: it stops working at once on gateways that have not seen it in the last
    /// 30 s, and within 30 s on those that have (they remember a verified key that long).
    Revoke {
        /// The key's id, as `keys list` shows it.
        id: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        source: Source,
    },
}

pub(crate) async fn run(command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create {
            org,
            role,
            label,
            json,
            source,
        } => {
            let org = OrgId::new(org).map_err(|e| anyhow::anyhow!("--org: {e}"))?;
            let role: Role = role.parse().map_err(|e| anyhow::anyhow!("--role: {e}"))?;
            let store = open(&source).await?;
            let key = undolog_gateway::create_key(&*store, org, role, label.clone()).await?;
            if json {
                let out = serde_json::json!({
                    "id": key.id, "org": key.org, "role": key.role, "label": label, "key": key.secret,
                });
                println!("{out}");
                return Ok(());
            }
            // The key alone on stdout, so `KEY=$(undolog keys create --org acme)` works.
            super::table::print_to_stderr(
                &["KEY ID", "ORG", "ROLE", "LABEL"],
                &[vec![
                    key.id.clone(),
                    key.org.to_string(),
                    key.role.to_string(),
                    label.unwrap_or_else(|| "-".into()),
                ]],
            );
            eprintln!(
                "created; send the key as `Authorization: Bearer <key>`. It is shown only now:"
            );
            println!("{}", key.secret);
            Ok(())
        }
        KeysCommand::List { org, json, source } => {
            let org = org
                .map(OrgId::new)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--org: {e}"))?;
            let keys = open(&source).await?.api_keys(org.as_ref()).await?;
            if json {
                let out: Vec<_> = keys.iter().map(described).collect();
                println!("{}", serde_json::Value::Array(out));
                return Ok(());
            }
            let rows: Vec<Vec<String>> = keys
                .iter()
                .map(|k| {
                    vec![
                        k.id.clone(),
                        k.org.to_string(),
                        k.role.to_string(),
                        k.label.clone().unwrap_or_else(|| "-".into()),
                        super::table::time(&k.created_at.as_millis().into()),
                        super::table::time(&k.revoked_at.map(|t| t.as_millis()).into()),
                    ]
                })
                .collect();
            super::table::print(
                &["KEY ID", "ORG", "ROLE", "LABEL", "CREATED", "REVOKED"],
                &rows,
            );
            Ok(())
        }
        KeysCommand::Revoke { id, json, source } => {
            let store = open(&source).await?;
            let key = store
                .revoke_api_key(&id, Timestamp::now())
                .await?
                .ok_or_else(|| {
                    anyhow::anyhow!("no key has the id {id:?}; `undolog keys list` shows them")
                })?;
            if json {
                println!("{}", described(&key));
                return Ok(());
            }
            let at = key.revoked_at.map(|t| t.to_string()).unwrap_or_default();
            println!(
                "revoked key {} (org {}, {}) at {at}; gateways stop accepting it within 30 s",
                key.id, key.org, key.role
            );
            Ok(())
        }
    }
}

async fn open(source: &Source) -> anyhow::Result<std::sync::Arc<dyn undolog_store::Store>> {
    let config = source.load(None)?;
    Ok(undolog_store::open_with(&config.store, &config.store_pool).await?)
}

/// A key as the operator sees it: everything but its hash.
fn described(key: &ApiKey) -> serde_json::Value {
    serde_json::json!({
        "id": key.id,
        "org": key.org,
        "role": key.role,
        "label": key.label,
        "created_at": key.created_at,
        "revoked_at": key.revoked_at,
    })
}
