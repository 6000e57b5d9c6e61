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
        #[command(flatten)]
        source: Source,
    },
}

pub(crate) async fn run(command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create { org, label, source } => {
            let org = OrgId::new(org).map_err(|e| anyhow::anyhow!("--org: {e}"))?;
            let config = source.load(None)?;
            let store = undolog_store::open_with(&config.store, &config.store_pool).await?;
            let key = undolog_gateway::create_key(&*store, org, label).await?;
            eprintln!(
                "created key {} for org {}; send it as `Authorization: Bearer <key>`. It is shown only now:",
                key.id, key.org
            );
            println!("{}", key.secret);
            Ok(())
        }
    }
}
