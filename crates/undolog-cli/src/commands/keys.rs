//! `undolog keys create --org NAME`: makes an API key and stores only its hash.

use undolog_types::OrgId;

use super::serve::Source;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum KeysCommand {
    /// Make a key for an org. The key is printed once; keep it safe.
    Create {
        #[arg(long)]
        org: String,
        /// A note to tell keys apart.
        #[arg(long)]
        label: Option<String>,
        /// Print `{"id", "org", "key"}` as JSON instead.
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
            label,
            json,
            source,
        } => {
            let org = OrgId::new(org).map_err(|e| anyhow::anyhow!("--org: {e}"))?;
            let config = source.load(None)?;
            let store = undolog_store::open_with(&config.store, &config.store_pool).await?;
            let key = undolog_gateway::create_key(&*store, org, label.clone()).await?;
            if json {
                let out = serde_json::json!({
                    "id": key.id, "org": key.org, "label": label, "key": key.secret,
                });
                println!("{out}");
                return Ok(());
            }
            // The key alone on stdout, so `KEY=$(undolog keys create --org acme)` works.
            super::table::print_to_stderr(
                &["KEY ID", "ORG", "LABEL"],
                &[vec![
                    key.id.clone(),
                    key.org.to_string(),
                    label.unwrap_or_else(|| "-".into()),
                ]],
            );
            eprintln!(
                "created; send the key as `Authorization: Bearer <key>`. It is shown only now:"
            );
            println!("{}", key.secret);
            Ok(())
        }
    }
}
